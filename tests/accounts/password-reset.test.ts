/**
 * Password reset: asking for a link (202, the same answer and time for every address, the mail sent
 * after the answer), and setting a new password with its token (once, within the hour; every
 * session ends, API tokens stay). The mail goes to a real SMTP server started here (smtp-server),
 * read back with mailparser; the link in it is what the tests follow. Also: the rate limit, a mail
 * server that is down or never answers, the settings, and the operator's `reset-link` command
 * against the embedded service as an operator runs it.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../server/src/config.js';
import { baseUrl, count, database, outputDir, secret, sha256, sql, startExtraServer, type TestServer } from '../support/harness.js';
import { signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import { Mailbox, type Mail } from '../support/mailbox.js';
import { callAt, expectData, expectError, expectInvalid, expectNoContent, tally, type Answer } from '../support/http.js';
import {
  embeddedServiceEnv,
  npmRunUser,
  operatorInviteCode,
  startServiceProcess,
  type ServiceProcess,
} from '../support/service-process.js';

const RESET_URL = 'https://app.example.com/reset?token=';
const FROM = 'Signalboard <noreply@example.com>';
const TOKEN = /^rst_[A-Za-z0-9_-]{43}$/;
const REQUESTED = {
  success: true,
  data: { message: 'If an account has this email address, a link to reset its password is on its way to it.' },
};

/** The token of the reset link in `mail`, registered as a secret. */
function tokenIn(mail: Mail): string {
  const escaped = RESET_URL.replace(/[.?*+^$()[\]{}|\\/]/g, '\\$&');
  const match = new RegExp(`${escaped}(\\S+)`).exec(mail.text);
  expect(match, mail.text).to.not.equal(null);
  const token = secret(match![1]);
  expect(token).to.match(TOKEN);
  return token;
}

const requestReset = (server: { url: string }, email: string, headers: Record<string, string> = {}) =>
  callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email }, headers);
const confirmReset = (server: { url: string }, token: string, newPassword: string) =>
  callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, { token, new_password: newPassword });
const login = (server: { url: string }, user: TestUser, password: string) =>
  callAt(server.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password });

function expectRequested(answer: Answer): void {
  expect(answer.status, answer.text).to.equal(202);
  expect(answer.json).to.deep.equal(REQUESTED);
}

/** The user's reset token row, as stored. */
async function tokenRow(server: TestServer, userId: string) {
  const rows = await sql<{ token_hash: string; used: boolean; ttl_seconds: number; expired: boolean }>(
    `select token_hash, used_at is not null as used, extract(epoch from expires_at - created_at)::int as ttl_seconds,
       expires_at <= now() as expired
     from password_reset_tokens where user_id = ?`,
    [userId],
    server.db,
  );
  return rows[0];
}

/** Asks for a reset for `user` on `server` and answers the token of the mail that arrives for it. */
async function mailedToken(server: TestServer, box: Mailbox, user: TestUser): Promise<string> {
  const before = box.mails.filter((m) => m.to.includes(user.email)).length;
  expectRequested(await requestReset(server, user.email));
  const mails = await box.waitFor(user.email, before + 1);
  return tokenIn(mails.at(-1)!);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Log lines of the run's log file (every test server logs there) whose message is `msg`. */
function logLines(msg: string): Record<string, unknown>[] {
  return readFileSync(path.join(outputDir, 'server.log'), 'utf8')
    .split('\n')
    .filter((line) => line.includes(msg))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry.msg === msg);
}

async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

describe('password reset', function () {
  this.timeout(120_000);

  describe('with mail (SMTP_URL)', () => {
    let box: Mailbox;
    let server: TestServer;

    before(async () => {
      box = await Mailbox.start();
      server = await startExtraServer({ SMTP_URL: box.url, SMTP_FROM: FROM, PASSWORD_RESET_URL: RESET_URL, ...CLOSES_AT_ONCE });
    });
    after(async () => {
      await server?.close();
      await box?.close();
    });

    it('mails a one-hour link; the token sets the password once, ends every session, keeps API tokens; stored only hashed', async () => {
      const user = await signUpOn(server);
      const otherSession = secret((expectData(await login(server, user, user.password), 201) as { token: string }).token);
      const apiToken = secret(
        (expectData(await callAt(server.url, 'POST', '/v1/auth/tokens', user.token, { name: 'kept' }), 201) as { token: string }).token,
      );

      expectRequested(await requestReset(server, user.email.toUpperCase()));
      const [mail] = await box.waitFor(user.email);
      expect(mail!.from).to.deep.equal({ name: 'Signalboard', address: 'noreply@example.com' });
      expect(mail!.subject).to.equal('Reset your Signalboard password');
      expect(mail!.text).to.include(user.username);
      const token = tokenIn(mail!);

      const stored = await tokenRow(server, user.id);
      expect(stored).to.deep.equal({ token_hash: sha256(token), used: false, ttl_seconds: 3600, expired: false });

      const newPassword = secret('a brand new password');
      expectNoContent(await confirmReset(server, token, newPassword));
      expect((await tokenRow(server, user.id))!.used).to.equal(true);
      expect(await count('select count(*)::int from sessions where user_id = ?', [user.id], server.db)).to.equal(0);
      for (const ended of [user.token, otherSession]) {
        expectError(await callAt(server.url, 'GET', '/v1/users/me', ended), 401, 'unauthenticated', 'an ended session');
      }
      expectData(await callAt(server.url, 'GET', '/v1/users/me', apiToken), 200, 'the API token');
      expectError(await login(server, user, user.password), 401, 'invalid_credentials', 'the old password');
      expectData(await login(server, user, newPassword), 201, 'the new password');

      // The same link again: refused, and nothing changes.
      expectError(await confirmReset(server, token, secret('yet another password')), 400, 'invalid_reset_token');
      expectData(await login(server, user, newPassword), 201, 'the new password still');
    });

    it('answers an address no account has exactly as a known one, and mails nothing to it', async () => {
      const known = await signUpOn(server);
      const unknownAddress = `${uniqueName('nobody')}@example.com`;
      const unknown = await requestReset(server, unknownAddress);
      const knownAnswer = await requestReset(server, known.email);
      expectRequested(unknown);
      expectRequested(knownAnswer);
      expect(unknown.text).to.equal(knownAnswer.text);
      expect(unknown.headers.get('content-type')).to.equal(knownAnswer.headers.get('content-type'));
      // The known address's mail, asked for after, has arrived, and the unknown one's work (a lookup
      // that finds nobody) started first; half a second more leaves room for any mail it would send.
      await box.waitFor(known.email);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(box.mails.filter((m) => m.to.includes(unknownAddress))).to.have.length(0);
    });

    it('takes the same time for a known and an unknown address (medians of 9 each)', async () => {
      const known = await signUpOn(server);
      const timings: Record<'known' | 'unknown', number[]> = { known: [], unknown: [] };
      for (let i = 0; i < 9; i++) {
        for (const which of ['known', 'unknown'] as const) {
          const started = performance.now();
          expectRequested(await requestReset(server, which === 'known' ? known.email : `${uniqueName('nobody')}@example.com`));
          timings[which].push(performance.now() - started);
        }
      }
      const [a, b] = [median(timings.known), median(timings.unknown)];
      // Generous: neither does more than answer; a lookup or a send on the request's path would add
      // milliseconds to one of them, a bcrypt or an SMTP round trip tens.
      expect(Math.max(a, b), `known ${a.toFixed(1)} ms, unknown ${b.toFixed(1)} ms`).to.be.below(Math.min(a, b) * 3 + 15);
      await box.waitFor(known.email, 9);
    });

    it('refuses an expired token (moved past its hour in the database) and leaves the password as it was', async () => {
      const user = await signUpOn(server);
      const token = await mailedToken(server, box, user);
      await sql(`update password_reset_tokens set expires_at = now() - interval '1 second' where user_id = ?`, [user.id], server.db);
      expectError(await confirmReset(server, token, secret('never set this one')), 400, 'invalid_reset_token');
      expect((await tokenRow(server, user.id))!.used).to.equal(false);
      expectData(await login(server, user, user.password), 201, 'the old password still');
    });

    it('a new request replaces the earlier token: the earlier one is refused, the new one works', async () => {
      const user = await signUpOn(server);
      const first = await mailedToken(server, box, user);
      const second = await mailedToken(server, box, user);
      expect(second).to.not.equal(first);
      expect(await count('select count(*)::int from password_reset_tokens where user_id = ?', [user.id], server.db)).to.equal(1);
      expectError(await confirmReset(server, first, secret('from the first link')), 400, 'invalid_reset_token');
      expectNoContent(await confirmReset(server, second, secret('from the second link')));
    });

    it('of racing confirmations with one token, exactly one succeeds', async () => {
      const user = await signUpOn(server);
      const token = await mailedToken(server, box, user);
      const passwords = Array.from({ length: 6 }, (_, i) => secret(`racing password ${i}`));
      const answers = await Promise.all(passwords.map((p) => confirmReset(server, token, p)));
      expect(tally(answers.map((a) => a.status))).to.deep.equal({ 204: 1, 400: 5 });
      for (const refused of answers.filter((a) => a.status === 400)) expectError(refused, 400, 'invalid_reset_token');
      const winner = passwords[answers.findIndex((a) => a.status === 204)]!;
      expectData(await login(server, user, winner), 201, 'the winning password');
    });

    it('refuses a new password the sign-up would refuse, and the token stays good', async () => {
      const user = await signUpOn(server);
      const token = await mailedToken(server, box, user);
      expectInvalid(await confirmReset(server, token, 'short'), '/body/new_password');
      expectInvalid(await confirmReset(server, token, 'é'.repeat(37)), '/body/new_password'); // 37 characters, 74 bytes
      expect((await tokenRow(server, user.id))!.used).to.equal(false);
      expectNoContent(await confirmReset(server, token, secret('a fine new password')));
    });

    it('ignores a credential sent along, valid or not', async () => {
      const user = await signUpOn(server);
      expectRequested(await requestReset(server, user.email, { Authorization: `Bearer ${user.token}` }));
      expectRequested(await requestReset(server, user.email, { Authorization: 'Bearer ses_not-a-real-one' }));
      await box.waitFor(user.email, 2);
    });
  });

  describe('without mail', () => {
    it('answers 202 and issues no token', async () => {
      const user = await signUp();
      expectRequested(await requestReset({ url: baseUrl() }, user.email));
      expect(await count('select count(*)::int from password_reset_tokens where user_id = ?', [user.id])).to.equal(0);
    });

    it('refuses bad bodies with 400 and an unknown token with invalid_reset_token', async () => {
      const url = baseUrl();
      expectInvalid(await callAt(url, 'POST', '/v1/auth/password-reset', undefined, { email: 'not an address' }), '/body/email');
      expectInvalid(await callAt(url, 'POST', '/v1/auth/password-reset', undefined, {}), '/body/email');
      expectInvalid(await callAt(url, 'POST', '/v1/auth/password-reset', undefined, { email: 'a@example.com', extra: 1 }), '/body/extra');
      expectInvalid(await callAt(url, 'POST', '/v1/auth/password-reset/confirm', undefined, { token: 'rst_x' }), '/body/new_password');
      expectError(await confirmReset({ url }, `rst_${'A'.repeat(43)}`, 'a good long password'), 400, 'invalid_reset_token');
      expectError(await confirmReset({ url }, 'anything', 'a good long password'), 400, 'invalid_reset_token');
      expectInvalid(await confirmReset({ url }, 'no such token!', 'a good long password'), '/body/token');
    });
  });

  describe('when the mail server fails', () => {
    let server: TestServer | undefined;
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    it('still answers 202 when it is down, and logs the failure without the address or the token', async () => {
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      server = await startExtraServer({
        SMTP_URL: `smtp://127.0.0.1:${port}`,
        SMTP_FROM: FROM,
        PASSWORD_RESET_URL: RESET_URL,
        ...CLOSES_AT_ONCE,
      });
      const user = await signUpOn(server);
      const before = logLines('password reset mail not sent').length;
      expectRequested(await requestReset(server, user.email));
      await waitUntil('the failure is logged', () => logLines('password reset mail not sent').length > before);
      const line = JSON.stringify(logLines('password reset mail not sent').at(-1));
      expect(line).to.not.include(user.email);
      expect(line).to.not.include('rst_');
    });

    it('answers at once when it accepts connections and never speaks', async () => {
      const sockets = new Set<Socket>();
      const silent: NetServer = createServer((socket) => sockets.add(socket));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      try {
        const port = (silent.address() as AddressInfo).port;
        server = await startExtraServer({
          SMTP_URL: `smtp://127.0.0.1:${port}`,
          SMTP_FROM: FROM,
          PASSWORD_RESET_URL: RESET_URL,
          ...CLOSES_AT_ONCE,
        });
        const user = await signUpOn(server);
        const started = performance.now();
        expectRequested(await requestReset(server, user.email));
        expect(performance.now() - started).to.be.below(2_000);
        await waitUntil('the mail server is reached', () => sockets.size > 0);
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => silent.close(() => resolve()));
      }
    });
  });

  describe('rate limit', () => {
    let server: TestServer | undefined;
    beforeEach(async () => {
      if (database().kind === 'postgresql') await sql('delete from rate_limits');
    });
    afterEach(async () => {
      await server?.close();
      server = undefined;
      if (database().kind === 'postgresql') await sql('delete from rate_limits');
    });

    it('counts both steps per address with sign-up and login (AUTH_RATE_LIMIT), then 429', async () => {
      server = await startExtraServer({ AUTH_RATE_LIMIT: '3', ...CLOSES_AT_ONCE });
      expectRequested(await requestReset(server, 'a@example.com'));
      expectError(await confirmReset(server, 'rst_unknown', 'a good long password'), 400, 'invalid_reset_token');
      const third = await requestReset(server, 'b@example.com');
      expectRequested(third);
      expect(third.headers.get('ratelimit-remaining')).to.equal('0');
      const refused = await requestReset(server, 'c@example.com');
      expectError(refused, 429, 'rate_limited');
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 60);
      expectError(await confirmReset(server, 'rst_unknown', 'a good long password'), 429, 'rate_limited');
      expectError(await login(server, { username: 'x' } as TestUser, 'whatever-password'), 429, 'rate_limited');
    });
  });

  describe('settings', () => {
    const base = { DATABASE_URL: '', DATA_DIR: '/tmp/x' };
    const refused = (env: Record<string, string>) => {
      try {
        loadConfig({ ...base, ...env });
      } catch (err) {
        expect(err).to.be.instanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error(`accepted: ${JSON.stringify(env)}`);
    };

    it('reads SMTP_URL, SMTP_FROM and PASSWORD_RESET_URL', () => {
      expect(loadConfig(base).passwordReset).to.deep.equal({ smtp: undefined, url: undefined });
      expect(loadConfig({ ...base, PASSWORD_RESET_URL: RESET_URL }).passwordReset).to.deep.equal({ smtp: undefined, url: RESET_URL });
      const env = { SMTP_URL: 'smtps://u:p@mail.example.com:465', SMTP_FROM: FROM, PASSWORD_RESET_URL: RESET_URL };
      expect(loadConfig({ ...base, ...env }).passwordReset).to.deep.equal({
        smtp: { url: env.SMTP_URL, from: FROM },
        url: RESET_URL,
      });
    });

    it('refuses incomplete or malformed ones with a clear message that never shows the SMTP password', () => {
      const full = { SMTP_URL: 'smtp://u:hunter2@mail.example.com:587', SMTP_FROM: 'noreply@example.com', PASSWORD_RESET_URL: RESET_URL };
      expect(refused({ ...full, SMTP_FROM: '' })).to.include('SMTP_FROM');
      expect(refused({ ...full, SMTP_FROM: 'nobody' })).to.include('SMTP_FROM');
      expect(refused({ ...full, PASSWORD_RESET_URL: '' })).to.include('PASSWORD_RESET_URL');
      expect(refused({ ...full, PASSWORD_RESET_URL: 'ftp://x/' })).to.include('PASSWORD_RESET_URL');
      expect(refused({ SMTP_FROM: 'noreply@example.com' })).to.include('SMTP_URL');
      for (const bad of ['http://u:hunter2@mail.example.com', 'not a url hunter2']) {
        const message = refused({ ...full, SMTP_URL: bad });
        expect(message).to.include('SMTP_URL');
        expect(message).to.not.include('hunter2');
      }
    });
  });

  describe('the operator command (embedded, while the service runs)', () => {
    let dataDir = '';
    let service: ServiceProcess | undefined;
    after(async () => {
      if (service) {
        service.child.kill('SIGTERM');
        await service.exited;
      }
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    });

    it('`npm run user -- reset-link <username>` prints a working link; an unknown username fails with exit 1', async () => {
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-reset-'));
      const env = embeddedServiceEnv(dataDir, { PASSWORD_RESET_URL: RESET_URL });
      service = await startServiceProcess(env);
      const invite = secret(await operatorInviteCode(env, 1));
      const username = uniqueName('reset');
      const password = secret('the forgotten password');
      const signup = await callAt(service.url, 'POST', '/v1/auth/signup', undefined, {
        username,
        email: `${username}@example.com`,
        password,
        invite,
      });
      const session = secret((expectData(signup, 201) as { token: string }).token);

      const made = await npmRunUser(env, ['reset-link', username.toUpperCase()]);
      expect(made.code, made.stderr).to.equal(0);
      const link = made.stdout.trimEnd().split('\n').at(-1)!;
      expect(link.startsWith(RESET_URL), made.stdout).to.equal(true);
      const token = secret(link.slice(RESET_URL.length));
      expect(token).to.match(TOKEN);
      expect(made.stdout).to.include('the running service');

      const newPassword = secret('the remembered password');
      expectNoContent(await confirmReset(service, token, newPassword));
      expectError(await callAt(service.url, 'GET', '/v1/users/me', session), 401, 'unauthenticated', 'the ended session');
      expectData(await callAt(service.url, 'POST', '/v1/auth/login', undefined, { login: username, password: newPassword }), 201);

      const unknown = await npmRunUser(env, ['reset-link', 'no-such-user']);
      expect(unknown.code).to.equal(1);
      expect(unknown.stderr).to.include('no user with the username "no-such-user"');
      const usage = await npmRunUser(env, ['reset-link']);
      expect(usage.code).to.equal(2);
    });
  });
});
