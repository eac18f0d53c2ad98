/**
 * Accounts: self-service. Changing one's username, email address and icon (`PATCH /v1/users/me`),
 * one's password (`PUT /v1/users/me/password`), and listing and ending one's sessions
 * (`/v1/auth/sessions`): every rule and refusal, with what is and is not in the database afterwards.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pino from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { DatabaseIconRows } from '../../server/src/domain/icons.js';
import { operatorResetLink } from '../../server/src/domain/password-reset.js';
import { Maintenance, MAINTENANCE_DEFAULTS } from '../../server/src/maintenance/prune.js';
import { IconStore } from '../../server/src/storage/icons.js';
import { apiToken, signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import {
  baseUrl,
  count,
  database,
  secret,
  sha256,
  sql,
  startExtraServer,
  startRateLimitedServer,
  type TestServer,
} from '../support/harness.js';
import { call, callAt, expectData, expectError, expectInvalid, expectNoContent, ISO_UTC, UUID7, type Answer } from '../support/http.js';
import { addMember, createProject, iconUrl, invite, projectPath } from '../support/projects.js';
import { notPng, png, storedIcon } from '../support/png.js';
import { RawStream } from '../support/sse.js';

const DATA_URL = 'data:image/png;base64,';
const ME = '/v1/users/me';
const PASSWORD = '/v1/users/me/password';
const SESSIONS = '/v1/auth/sessions';

async function userRow(id: string): Promise<{ username: string; email: string; icon: string | null; password_hash: string }> {
  const [row] = await sql<{ username: string; email: string; icon: string | null; password_hash: string }>(
    'select username, email, icon, password_hash from users where id = ?',
    [id],
  );
  return row!;
}

async function login(user: { username: string }, password: string, userAgent?: string): Promise<string> {
  const answer = await call(
    'POST',
    '/v1/auth/login',
    undefined,
    { login: user.username, password },
    userAgent ? { 'User-Agent': userAgent } : {},
  );
  return secret(expectData(answer, 201, 'login').token as string);
}

/** Whether the stream ends within a second. */
async function endsWithinASecond(stream: RawStream): Promise<boolean> {
  const how = await Promise.race([stream.ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 1_000))]);
  return how === 'end';
}

async function sessionIds(userId: string, server?: TestServer): Promise<string[]> {
  return (await sql<{ id: string }>('select id from sessions where user_id = ? order by id', [userId], server?.db)).map((row) => row.id);
}

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing the server does not wait out idle kept-alive
 * connections (about 3 s each at the default 5 s). What is tested here is not the keep-alive.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

/** A reset token for the user on `server`, made as the operator's `reset-link` makes one. */
async function operatorResetLinkOn(server: TestServer, user: TestUser): Promise<string> {
  return secret(await operatorResetLink(server.db.orm.em.fork(), user.username, undefined));
}

describe('accounts: self-service', () => {
  describe('PATCH /v1/users/me', () => {
    let user: TestUser;
    beforeEach(async () => {
      user = await signUp();
    });

    it('changes the username (stored lower-case); GET /v1/users/me shows it', async () => {
      const username = uniqueName('renamed');
      const changed = expectData(await call('PATCH', ME, user.token, { username: username.toUpperCase() }));
      expect(changed).to.deep.include({ id: user.id, username, email: user.email, icon: null });
      expect(changed.created_at).to.match(ISO_UTC);
      expect(expectData(await call('GET', ME, user.token))).to.deep.equal(changed);
      expect(await userRow(user.id)).to.include({ username, email: user.email, icon: null });
      // The new name signs in; the old one no longer does.
      await login({ username }, user.password);
      expectError(
        await call('POST', '/v1/auth/login', undefined, { login: user.username, password: user.password }),
        401,
        'invalid_credentials',
      );
    });

    it('an empty body is 200 and changes nothing', async () => {
      const before = await userRow(user.id);
      const answer = expectData(await call('PATCH', ME, user.token, {}));
      expect(answer).to.deep.include({ id: user.id, username: user.username, email: user.email, icon: null });
      expect(await userRow(user.id)).to.deep.equal(before);
    });

    it('refuses an unknown field (the e-mail address among them), a bad username or icon with 400, changing nothing', async () => {
      const before = await userRow(user.id);
      const icons = await count('select count(*)::int as n from icons');
      expectInvalid(await call('PATCH', ME, user.token, { username: uniqueName(), password: 'x'.repeat(10) }), '/body/password');
      expectInvalid(await call('PATCH', ME, user.token, { username: 'no spaces allowed' }), '/body/username');
      expectInvalid(await call('PATCH', ME, user.token, { username: 'ab' }), '/body/username');
      // The address changes only through PUT /v1/users/me/email, which proves itself (email-change.test.ts).
      expectInvalid(await call('PATCH', ME, user.token, { email: `${uniqueName()}@example.com` }), '/body/email');
      expectInvalid(
        await call('PATCH', ME, user.token, { username: uniqueName(), icon: DATA_URL + notPng.toString('base64') }),
        '/body/icon',
      );
      // The update form of an icon is a data URL: bare Base64 is refused.
      expectInvalid(await call('PATCH', ME, user.token, { icon: png(8, 8).toString('base64') }), '/body/icon');
      expect(await userRow(user.id)).to.deep.equal(before);
      expect(await count('select count(*)::int as n from icons')).to.equal(icons);
    });

    it('409 username_taken without regard to case, changing nothing', async () => {
      const other = await signUp();
      const before = await userRow(user.id);
      expectError(await call('PATCH', ME, user.token, { username: other.username.toUpperCase() }), 409, 'username_taken');
      // A taken name refuses the whole change.
      const icon = DATA_URL + png(8, 8).toString('base64');
      expectError(await call('PATCH', ME, user.token, { username: other.username, icon }), 409, 'username_taken');
      expect(await userRow(user.id)).to.deep.equal(before);
      // One's own name, in another case, is not taken.
      expect(expectData(await call('PATCH', ME, user.token, { username: user.username.toUpperCase() }))).to.include({
        username: user.username,
      });
    });

    it('two users racing to take one name: one gets it, the other 409', async () => {
      const other = await signUp();
      const name = uniqueName('race');
      const answers = await Promise.all([user, other].map((u) => call('PATCH', ME, u.token, { username: name })));
      expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 409]);
      expect(answers.find((a) => a.status === 409)!.json.error.code).to.equal('username_taken');
      expect(await count('select count(*)::int as n from users where username = ?', [name])).to.equal(1);
    });

    it('an API token may change the username and icon too (neither opens the account)', async () => {
      const token = await apiToken(user.token);
      const username = uniqueName('bytoken');
      expect(expectData(await call('PATCH', ME, token, { username }))).to.include({ username });
      expect(await userRow(user.id)).to.include({ username });
      // The address a reset link goes to is out of its reach: the finding's first step answers 400 and changes nothing.
      expectInvalid(await call('PATCH', ME, token, { email: `${uniqueName('attacker')}@example.com` }), '/body/email');
      expectError(
        await call('PUT', '/v1/users/me/email', token, { email: `${uniqueName('attacker')}@example.com`, current_password: user.password }),
        403,
        'session_required',
      );
      expect(await userRow(user.id)).to.include({ email: user.email });
      expect(await count('select count(*)::int as n from email_changes where user_id = ?', [user.id])).to.equal(0);
    });

    it('401 without a valid credential', async () => {
      expectError(await call('PATCH', ME, undefined, { username: uniqueName() }), 401, 'unauthenticated');
      expectError(await call('PATCH', ME, 'ses_nobody', { username: uniqueName() }), 401, 'unauthenticated');
    });

    describe('icon', () => {
      it('is stored like a project icon, shown in /v1/users/me, in every project member list and in invites; null removes it', async () => {
        const bytes = png(16, 16, { color: [200, 10, 10] });
        const key = sha256(storedIcon(bytes));
        const changed = expectData(await call('PATCH', ME, user.token, { icon: DATA_URL + bytes.toString('base64') }));
        expect(changed.icon).to.equal(iconUrl(key));
        expect(expectData(await call('GET', ME, user.token)).icon).to.equal(iconUrl(key));
        expect(await userRow(user.id)).to.include({ icon: key });
        expect(await count('select count(*)::int as n from icons where sha256 = ?', [key])).to.equal(1);
        const served = await fetch(iconUrl(key));
        expect(served.status).to.equal(200);
        expect(Buffer.from(await served.arrayBuffer()).equals(storedIcon(bytes))).to.equal(true);

        // As the owner of one project and a member of another.
        const own = await createProject(user.token, { name: 'Mine' });
        const owner = await signUp();
        const theirs = await createProject(owner.token, { name: 'Theirs' });
        await addMember(owner.token, theirs.namespace, user);
        const ownMembers = expectData(await call('GET', projectPath(own.namespace), user.token)).members;
        expect(ownMembers).to.deep.equal([{ id: user.id, username: user.username, icon: iconUrl(key), role: 'owner' }]);
        const theirMembers = expectData(await call('GET', projectPath(theirs.namespace), owner.token)).members;
        expect(theirMembers).to.deep.include({ id: user.id, username: user.username, icon: iconUrl(key), role: 'member' });
        // As an invitee in the project's invites, and as the inviter in the invitee's own list.
        const invitee = await signUp();
        await invite(user.token, own.namespace, invitee.username);
        const invites = expectData(await call('GET', projectPath(own.namespace, '/invites'), user.token)).items;
        expect(invites[0].invited_by).to.deep.equal({ id: user.id, username: user.username, icon: iconUrl(key) });
        const received = expectData(await call('GET', '/v1/users/me/invites', invitee.token)).items;
        expect(received[0].invited_by).to.deep.equal({ id: user.id, username: user.username, icon: iconUrl(key) });

        const removed = expectData(await call('PATCH', ME, user.token, { icon: null }));
        expect(removed.icon).to.equal(null);
        expect(await userRow(user.id)).to.include({ icon: null });
        expect(expectData(await call('GET', projectPath(own.namespace), user.token)).members[0].icon).to.equal(null);
      });

      it('a user icon counts as a reference: pruning keeps it while the user shows it, and removes it after', async () => {
        const bytes = png(12, 12, { color: [10, 200, 30] });
        const key = sha256(storedIcon(bytes));
        expectData(await call('PATCH', ME, user.token, { icon: DATA_URL + bytes.toString('base64') }));
        const age = () => sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [key]);
        const db = database();
        const store = new IconStore(new DatabaseIconRows(() => db.orm.em.fork()), () => 'http://cdn.test');
        const config = loadConfig({ DATABASE_URL: db.kind === 'postgresql' ? db.orm.config.get('clientUrl') : '' });
        const prune = () => new Maintenance(db, store, pino({ level: 'silent' }), config, MAINTENANCE_DEFAULTS).pruneOnce();
        const stored = () => count('select count(*)::int as n from icons where sha256 = ?', [key]);

        await age(); // past the grace period: only the user's reference keeps it
        await prune();
        expect(await stored(), 'kept while the user shows it').to.equal(1);
        expect((await fetch(iconUrl(key))).status).to.equal(200);

        expectData(await call('PATCH', ME, user.token, { icon: null }));
        await age();
        await prune();
        expect(await stored(), 'removed once nothing refers to it').to.equal(0);
      });
    });
  });

  describe('PUT /v1/users/me/password', () => {
    it('401 invalid_credentials for a wrong current password, changing nothing', async () => {
      const user = await signUp();
      const other = await login(user, user.password);
      const before = await userRow(user.id);
      const sessions = await sessionIds(user.id);
      const answer = await call('PUT', PASSWORD, user.token, { current_password: 'wrong password', new_password: 'a new password' });
      expectError(answer, 401, 'invalid_credentials');
      expect(answer.headers.get('www-authenticate')).to.equal('Bearer');
      expect(await userRow(user.id)).to.deep.equal(before);
      expect(await sessionIds(user.id)).to.deep.equal(sessions);
      expectData(await call('GET', ME, other));
    });

    it('403 session_required with an API token; 401 without a credential', async () => {
      const user = await signUp();
      const token = await apiToken(user.token);
      const body = { current_password: user.password, new_password: 'another password' };
      const before = await userRow(user.id);
      expectError(await call('PUT', PASSWORD, token, body), 403, 'session_required');
      expectError(await call('PUT', PASSWORD, undefined, body), 401, 'unauthenticated');
      expect(await userRow(user.id)).to.deep.equal(before);
      await login(user, user.password);
    });

    it('holds the new password to the sign-up rules: 8–72 bytes in UTF-8; unknown fields are 400', async () => {
      const user = await signUp();
      const before = await userRow(user.id);
      expectInvalid(
        await call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: 'short' }),
        '/body/new_password',
      );
      expectInvalid(
        await call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: 'é'.repeat(40) }),
        '/body/new_password',
      );
      expectInvalid(await call('PUT', PASSWORD, user.token, { current_password: user.password }), '/body/new_password');
      expectInvalid(
        await call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: 'long enough', extra: 1 }),
        '/body/extra',
      );
      expect(await userRow(user.id)).to.deep.equal(before);
    });

    it('204: the new password logs in and the old does not; every other session ends, the calling one and API tokens stay', async () => {
      const user = await signUp();
      const other = await login(user, user.password, 'Other device');
      const token = await apiToken(user.token);
      const next = secret(`new-${randomUUID()}`);
      expectNoContent(await call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: next }));

      expectError(await call('GET', ME, other), 401, 'unauthenticated');
      expectData(await call('GET', ME, user.token));
      expectData(await call('GET', ME, token));
      expect(await count('select count(*)::int as n from sessions where user_id = ?', [user.id])).to.equal(1);
      expect(await count('select count(*)::int as n from api_tokens where user_id = ?', [user.id])).to.equal(1);

      expectError(
        await call('POST', '/v1/auth/login', undefined, { login: user.username, password: user.password }),
        401,
        'invalid_credentials',
      );
      await login(user, next);
      // The old password no longer passes as the current one.
      expectError(
        await call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: 'whatever else' }),
        401,
        'invalid_credentials',
      );
    });

    it('counts against the sign-in limit of the client address, as logins do: guessing is refused with 429', async function () {
      this.timeout(120_000);
      // Cheap bcrypt: the limit counts requests, not their cost.
      const server = await startRateLimitedServer({ AUTH_RATE_LIMIT: '3', BCRYPT_ROUNDS: '4', ...CLOSES_AT_ONCE });
      try {
        const user = await signUpOn(server); // the first point of this address
        const guess = () =>
          callAt(server.url, 'PUT', PASSWORD, user.token, { current_password: 'a wrong guess', new_password: 'another password' });
        expectError(await guess(), 401, 'invalid_credentials');
        expectError(await guess(), 401, 'invalid_credentials');
        const refused = await guess();
        expectError(refused, 429, 'rate_limited');
        expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
        // Login shares the spent limit.
        const login = await callAt(server.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password: user.password });
        expectError(login, 429, 'rate_limited');
      } finally {
        await server.close();
      }
    });

    it('two changes racing from one password: one wins, the other is refused', async () => {
      const user = await signUp();
      const second = await login(user, user.password);
      const [a, b] = [secret(`a-${randomUUID()}`), secret(`b-${randomUUID()}`)];
      const answers = await Promise.all([
        call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: a }),
        call('PUT', PASSWORD, second, { current_password: user.password, new_password: b }),
      ]);
      const statuses = answers.map((answer) => answer.status).sort();
      // The loser is refused as a wrong password, or its session was ended by the winner first.
      expect(statuses[0]).to.equal(204);
      expect(statuses[1]).to.equal(401);
      const winner = answers[0].status === 204 ? a : b;
      await login(user, winner);
      expect(await count('select count(*)::int as n from sessions where user_id = ?', [user.id])).to.equal(2);
    });
  });

  describe('logins racing a password change or reset', function () {
    this.timeout(180_000);
    const TRIALS = 20;
    let server: TestServer;
    // bcrypt at its default cost, as deployed: a login's compare takes long enough for a change to commit meanwhile.
    before(async () => {
      server = await startExtraServer({ BCRYPT_ROUNDS: '10', ...CLOSES_AT_ONCE });
    });
    after(() => server.close());

    /** Logins with `password` sent `offsetsMs` after `change` starts; what each opened, and the change's answer. */
    async function race(user: TestUser, password: string, change: () => Promise<Answer>, offsetsMs: number[]) {
      const logins = offsetsMs.map(async (offset) => {
        await new Promise((resolve) => setTimeout(resolve, offset));
        return callAt(server.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password });
      });
      const [changed, ...answers] = await Promise.all([change(), ...logins]);
      return { changed, opened: answers.filter((a) => a.status === 201).map((a) => secret(a.json.data.token as string)) };
    }

    // One account for all the trials of a test: each trial starts where the last left it (one session,
    // the changer's, or none after a reset; a password the test knows), as a new account would, without
    // a sign-up's bcrypt hash per trial.
    it(`a login that checked the old password keeps no session once the change has answered (${TRIALS} trials)`, async () => {
      let opened = 0;
      const user = await signUpOn(server);
      for (let trial = 0; trial < TRIALS; trial++) {
        expect(await sessionIds(user.id, server), `trial ${trial}: before`).to.have.length(1);
        const current = user.password;
        const next = secret(`changed-${randomUUID()}`);
        const change = () => callAt(server.url, 'PUT', PASSWORD, user.token, { current_password: current, new_password: next });
        const result = await race(user, current, change, [0, 30, 60, 90, 120, 150, 200]);
        expectNoContent(result.changed);
        user.password = next;
        opened += result.opened.length;
        for (const token of result.opened)
          expectError(await callAt(server.url, 'GET', ME, token), 401, 'unauthenticated', `trial ${trial}`);
        expect(await sessionIds(user.id, server), `trial ${trial}`).to.have.length(1); // the changer's own
      }
      console.log(`      ${TRIALS} trials: ${opened} of ${TRIALS * 7} racing logins got a session before the change; none kept it`);
    });

    it(`a login that checked the old password keeps no session once a reset has answered (${TRIALS / 2} trials)`, async () => {
      const user = await signUpOn(server);
      for (let trial = 0; trial < TRIALS / 2; trial++) {
        const link = await operatorResetLinkOn(server, user);
        const next = secret(`reset-${randomUUID()}`);
        const reset = () =>
          callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, {
            token: link,
            new_password: next,
          });
        const result = await race(user, user.password, reset, [0, 30, 60, 90, 120, 150, 200]);
        expectNoContent(result.changed);
        user.password = next;
        for (const token of result.opened)
          expectError(await callAt(server.url, 'GET', ME, token), 401, 'unauthenticated', `trial ${trial}`);
        expect(await sessionIds(user.id, server), `trial ${trial}`).to.deep.equal([]);
      }
    });
  });

  describe('MAX_SESSIONS_PER_USER', () => {
    it('a login past the cap ends the session used longest ago; the others go on', async function () {
      this.timeout(60_000);
      // Cheap bcrypt: the cap counts sessions, not what a login costs.
      const server = await startExtraServer({ MAX_SESSIONS_PER_USER: '3', BCRYPT_ROUNDS: '4', ...CLOSES_AT_ONCE });
      try {
        const user = await signUpOn(server);
        const loginOn = async () =>
          secret(
            expectData(
              await callAt(server.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password: user.password }),
              201,
            ).token as string,
          );
        const second = await loginOn();
        const third = await loginOn();
        // Used an hour ago, two hours ago, now: the second is the one used longest ago.
        const usedAgo = (token: string, hours: number) =>
          sql(`update sessions set last_used_at = now() - ? * interval '1 hour' where token_hash = ?`, [hours, sha256(token)], server.db);
        await usedAgo(user.token, 1);
        await usedAgo(second, 2);
        await usedAgo(third, 0);
        const fourth = await loginOn();
        expect(await sessionIds(user.id, server)).to.have.length(3);
        expectError(await callAt(server.url, 'GET', ME, second), 401, 'unauthenticated');
        for (const token of [user.token, third, fourth]) expectData(await callAt(server.url, 'GET', ME, token));
        // Many more logins never hold more than the cap.
        for (let i = 0; i < 5; i++) await loginOn();
        expect(await sessionIds(user.id, server)).to.have.length(3);
      } finally {
        await server.close();
      }
    });
  });

  it('the event streams of the sessions a password change or DELETE /v1/auth/sessions ends, end at once; the caller’s go on', async function () {
    this.timeout(60_000);
    const user = await signUp();
    const project = await createProject(user.token);
    const url = baseUrl() + projectPath(project.namespace, '/events/stream');
    const [byPassword, bySessionEnd] = [await login(user, user.password), await login(user, user.password)];
    const ids = expectData(await call('GET', SESSIONS, bySessionEnd)).items.filter((s: any) => s.current);
    const streams = await Promise.all([user.token, byPassword, bySessionEnd].map((token) => RawStream.open(url, { token })));
    const [callers, other, ended] = streams;
    try {
      for (const stream of streams) await stream.until(() => stream.retry !== undefined, 5_000);
      expectNoContent(await call('DELETE', `${SESSIONS}/${ids[0].id}`, user.token));
      expect(await endsWithinASecond(ended!), 'the ended session’s stream').to.equal(true);
      const next = secret(`new-${randomUUID()}`);
      expectNoContent(await call('PUT', PASSWORD, user.token, { current_password: user.password, new_password: next }));
      expect(await endsWithinASecond(other!), 'the other session’s stream').to.equal(true);
      expect(callers!.endedAt, 'the calling session’s stream').to.equal(undefined);
    } finally {
      for (const stream of streams) stream.close();
    }
  });

  describe('GET and DELETE /v1/auth/sessions', () => {
    it('lists the caller’s sessions, newest first, with their device and the calling one marked current; never a token', async () => {
      const user = await signUp({ userAgent: 'First device' });
      const second = await login(user, user.password, 'Second device');
      const other = await signUp();
      const page = expectData(await call('GET', `${SESSIONS}?limit=10`, second));
      expect(page.next_cursor).to.equal(null);
      expect(page.items).to.have.length(2);
      expect(page.items.map((s: any) => [s.user_agent, s.current])).to.deep.equal([
        ['Second device', true],
        ['First device', false],
      ]);
      for (const session of page.items) {
        expect(session).to.have.all.keys('id', 'user_agent', 'ip', 'created_at', 'last_used_at', 'current');
        expect(session.id).to.match(UUID7);
        expect(session.ip).to.be.a('string');
        expect(session.created_at).to.match(ISO_UTC);
        expect(session.last_used_at).to.match(ISO_UTC);
      }
      expect(await sessionIds(user.id)).to.have.members(page.items.map((s: any) => s.id));
      expect(page.items.map((s: any) => s.id)).not.to.include((await sessionIds(other.id))[0]);

      // Paginated by cursor.
      const first = expectData(await call('GET', `${SESSIONS}?limit=1`, user.token));
      expect(first.items[0].current).to.equal(false);
      const rest = expectData(await call('GET', `${SESSIONS}?limit=1&cursor=${first.next_cursor}`, user.token));
      expect(rest.items[0]).to.include({ user_agent: 'First device', current: true });
      expect(rest.next_cursor).to.equal(null);
    });

    it('session only: an API token is 403 session_required on both', async () => {
      const user = await signUp();
      const token = await apiToken(user.token);
      const [session] = await sessionIds(user.id);
      expectError(await call('GET', SESSIONS, token), 403, 'session_required');
      expectError(await call('DELETE', `${SESSIONS}/${session}`, token), 403, 'session_required');
      expect(await sessionIds(user.id)).to.deep.equal([session]);
    });

    it('DELETE ends one of the caller’s sessions; another user’s or an unknown id is 404, a malformed one 400', async () => {
      const user = await signUp();
      const second = await login(user, user.password);
      const other = await signUp();
      const [othersSession] = await sessionIds(other.id);
      expectError(await call('DELETE', `${SESSIONS}/${othersSession}`, user.token), 404, 'not_found');
      expect(await sessionIds(other.id)).to.deep.equal([othersSession]);
      expectData(await call('GET', ME, other.token));
      expectError(await call('DELETE', `${SESSIONS}/${randomUUID()}`, user.token), 404, 'not_found');
      expectInvalid(await call('DELETE', `${SESSIONS}/not-a-uuid`, user.token), '/path/id');

      const secondId = expectData(await call('GET', SESSIONS, second)).items.find((s: any) => s.current).id;
      expectNoContent(await call('DELETE', `${SESSIONS}/${secondId}`, user.token));
      expectError(await call('GET', ME, second), 401, 'unauthenticated');
      expect(await count('select count(*)::int as n from sessions where id = ?', [secondId])).to.equal(0);
      expectError(await call('DELETE', `${SESSIONS}/${secondId}`, user.token), 404, 'not_found');
    });

    it('ending the calling session is a logout', async () => {
      const user = await signUp();
      const [own] = await sessionIds(user.id);
      expectNoContent(await call('DELETE', `${SESSIONS}/${own}`, user.token));
      expectError(await call('GET', ME, user.token), 401, 'unauthenticated');
      expect(await sessionIds(user.id)).to.deep.equal([]);
    });
  });
});
