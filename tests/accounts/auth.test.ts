/**
 * Accounts and credentials: sign-up with invite codes, login, logout, the Authorization header, and
 * GET /v1/users/me. Every refusal is checked for its exact status and code, and for what it left in
 * the database (nothing).
 */
import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { randomToken } from '../../tools/src/conformance/case.js';
import { baseUrl, client, secret, sha256, sql, startExtraServer } from '../support/harness.js';
import { apiToken, inviteCode, signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import { call, callAt, DAY_MS, expectCloseTo, expectError, expectInvalid, http, ISO_UTC, UUID7, type Answer } from '../support/http.js';

const SESSION_TOKEN = /^ses_[A-Za-z0-9_-]{43}$/;

/** Invite codes are stored as the SHA-256 of their lower-cased form. */
function inviteHash(code: string): string {
  return sha256(code.toLowerCase());
}

async function usesLeft(code: string): Promise<number> {
  const rows = await sql<{ uses_left: number }>('select uses_left from invite_codes where code_hash = ?', [inviteHash(code)]);
  expect(rows, 'the invite code row').to.have.length(1);
  return rows[0]!.uses_left;
}

/** Row counts of every table a sign-up or login writes, and the uses left on all invite codes. */
async function snapshot() {
  const [row] = await sql<{ users: number; sessions: number; api_tokens: number; uses_left: number }>(
    `select (select count(*)::int from users) as users,
            (select count(*)::int from sessions) as sessions,
            (select count(*)::int from api_tokens) as api_tokens,
            (select coalesce(sum(uses_left), 0)::int from invite_codes) as uses_left`,
  );
  return row!;
}

async function usersNamed(username: string, email: string): Promise<number> {
  const [row] = await sql<{ n: number }>(
    'select count(*)::int as n from users where lower(username) = lower(?) or lower(email) = lower(?)',
    [username, email],
  );
  return row!.n;
}

function newPassword(): string {
  return secret(`pw-${randomBytes(8).toString('hex')}`);
}

/** A complete, valid sign-up body with a fresh single-use invite code. */
async function signupBody(overrides: Record<string, unknown> = {}) {
  const username = uniqueName();
  return { username, email: `${username}@example.com`, password: newPassword(), invite: await inviteCode(), ...overrides };
}

function signup(body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call('POST', '/v1/auth/signup', undefined, body, headers);
}

function login(body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call('POST', '/v1/auth/login', undefined, body, headers);
}

function me(authorization?: string): Promise<Answer> {
  return http('GET', '/v1/users/me', authorization === undefined ? {} : { headers: { Authorization: authorization } });
}

/** A sign-up that must succeed (201); its session token is registered as a secret. */
async function expectSignedUp(body: unknown): Promise<Answer> {
  const answer = await signup(body);
  expect(answer.status, answer.text).to.equal(201);
  secret(answer.json.data.token as string);
  return answer;
}

/** Sends a request that must be refused with `status` and `code`; no table a sign-up or login writes may change. */
async function expectNothingStoredBy(send: () => Promise<Answer>, status: number, code: string): Promise<Answer> {
  const before = await snapshot();
  const answer = await send();
  expectError(answer, status, code);
  expect(await snapshot()).to.deep.equal(before);
  return answer;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Complete responses at the start of `data` (every answer of this service has a Content-Length). */
function parseResponses(data: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = data;
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) return responses;
    const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyBytes = Buffer.from(rest.slice(headEnd + 4), 'utf8');
    if (bodyBytes.length < length) return responses;
    responses.push({ status: Number(statusLine!.split(' ')[1]), headers, body: bodyBytes.subarray(0, length).toString('utf8') });
    rest = bodyBytes.subarray(length).toString('utf8');
  }
}

/**
 * POST /v1/auth/signup with `json` sent chunked (no Content-Length) or with its Content-Length, in
 * pieces of 64 KiB written one event-loop turn apart (so the server can answer while the body is
 * still coming), on a raw connection of its own, so that whatever state the server leaves the
 * connection in cannot reach fetch's shared pool. With `followUp`, then sends `GET /v1` on the same
 * connection, as a keep-alive client would, and waits up to 3 s for its answer.
 */
async function oversizedThenFollowUp(
  json: string,
  followUp: boolean,
  framing: 'chunked' | 'length' = 'chunked',
): Promise<{ responses: RawResponse[]; ending: string }> {
  const url = new URL(baseUrl());
  const socket = net.connect(Number(url.port), url.hostname);
  let data = '';
  let ending = 'the connection stayed open without an answer';
  const settled = new Promise<void>((resolve) => {
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
      if (parseResponses(data).length >= (followUp ? 2 : 1)) resolve();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      ending = `connection error ${error.code ?? error.message}`;
      resolve();
    });
    socket.on('close', () => {
      if (ending.startsWith('the connection stayed')) ending = 'the connection was closed';
      resolve();
    });
  });
  try {
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const bytes = Buffer.from(json, 'utf8');
    const chunked = framing === 'chunked';
    socket.write(
      `POST /v1/auth/signup HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: ` +
        `application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${bytes.length}`}\r\n\r\n`,
    );
    for (let at = 0; at < bytes.length && !socket.destroyed; at += 64 * 1024) {
      const piece = bytes.subarray(at, at + 64 * 1024);
      if (chunked) socket.write(`${piece.length.toString(16)}\r\n`);
      socket.write(piece);
      if (chunked) socket.write('\r\n');
      await new Promise((r) => setImmediate(r));
    }
    if (chunked && !socket.destroyed) socket.write('0\r\n\r\n');
    if (followUp) {
      // Wait for the first answer, as a client reusing the connection does.
      for (let waited = 0; parseResponses(data).length === 0 && waited < 3000 && !socket.destroyed; waited += 20)
        await new Promise((r) => setTimeout(r, 20));
      if (!socket.destroyed) socket.write(`GET /v1 HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    }
    await Promise.race([settled, new Promise((r) => setTimeout(r, 3000))]);
    return { responses: parseResponses(data), ending };
  } finally {
    socket.destroy();
  }
}

describe('POST /v1/auth/signup', () => {
  describe('a valid sign-up', () => {
    it('answers 201 with a session token and exactly the public fields of the new user', async () => {
      const username = uniqueName('MixedCase');
      const email = `${username}@Example.COM`;
      const password = newPassword();
      const before = Date.now();
      const { data, error, response } = await client().POST('/v1/auth/signup', {
        body: { username, email, password, invite: await inviteCode() },
      });
      expect(response.status, JSON.stringify(error)).to.equal(201);
      expect(data).to.have.all.keys('success', 'data');
      expect(data!.success).to.equal(true);
      expect(data!.data).to.have.all.keys('token', 'expires_at', 'user');
      secret(data!.data.token);
      expect(data!.data.token).to.match(SESSION_TOKEN);
      const user = data!.data.user;
      expect(user).to.have.all.keys('id', 'username', 'email', 'icon', 'created_at');
      expect(user.id).to.match(UUID7);
      expect(user.username).to.equal(username.toLowerCase());
      expect(user.email).to.equal(email);
      expect(user.icon).to.equal(null);
      expect(user.created_at).to.match(ISO_UTC);
      expectCloseTo(user.created_at, before, 60_000, 'created_at');
      expect(data!.data.expires_at).to.match(ISO_UTC);
      expectCloseTo(data!.data.expires_at, before + 30 * DAY_MS, 60_000, 'expires_at');
    });

    it('stores the username lower-case and the password only as a bcrypt hash', async () => {
      const username = uniqueName('MixedCase');
      const password = newPassword();
      const { data, response } = await client().POST('/v1/auth/signup', {
        body: { username, email: `${username}@example.com`, password, invite: await inviteCode() },
      });
      expect(response.status).to.equal(201);
      secret(data!.data.token);
      const rows = await sql<{ id: string; username: string; email: string; password_hash: string; icon: string | null }>(
        'select id, username, email, password_hash, icon from users where id = ?',
        [data!.data.user.id],
      );
      expect(rows).to.have.length(1);
      const row = rows[0]!;
      expect(row.username).to.equal(username.toLowerCase());
      expect(row.username).to.not.equal(username);
      expect(row.email).to.equal(`${username}@example.com`);
      expect(row.icon).to.equal(null);
      expect(row.password_hash.startsWith('$2')).to.equal(true);
      expect(row.password_hash).to.not.equal(password);
      expect(row.password_hash).to.not.include(password);
      expect(await bcrypt.compare(password, row.password_hash)).to.equal(true);
    });

    it('opens a session that records the device (user agent and address) and expires 30 days from now', async () => {
      const userAgent = `auth-tests/1.0 (${uniqueName('ua')})`;
      const before = Date.now();
      const { data, response } = await client().POST('/v1/auth/signup', {
        body: await signupBody(),
        headers: { 'User-Agent': userAgent },
      });
      expect(response.status).to.equal(201);
      const token = secret(data!.data.token);
      const rows = await sql<{
        user_id: string;
        token_hash: string;
        user_agent: string;
        ip: string;
        created_at: Date;
        last_used_at: Date;
        expires_at: Date;
      }>('select user_id, token_hash, user_agent, ip, created_at, last_used_at, expires_at from sessions where user_id = ?', [
        data!.data.user.id,
      ]);
      expect(rows).to.have.length(1);
      const row = rows[0]!;
      expect(row.token_hash).to.equal(sha256(token));
      expect(row.user_agent).to.equal(userAgent);
      expect(row.ip)
        .to.be.a('string')
        .that.matches(/127\.0\.0\.1$|^::1$/);
      expectCloseTo(row.created_at, before, 60_000, 'sessions.created_at');
      expectCloseTo(row.last_used_at, before, 60_000, 'sessions.last_used_at');
      expectCloseTo(row.expires_at, before + 30 * DAY_MS, 60_000, 'sessions.expires_at');
      expect(new Date(row.expires_at).toISOString()).to.equal(data!.data.expires_at);
    });

    it('gives a token that works on GET /v1/users/me at once', async () => {
      const user = await signUp();
      const answer = await me(`Bearer ${user.token}`);
      expect(answer.status).to.equal(200);
      expect(answer.json.data.id).to.equal(user.id);
    });
  });

  describe('invite codes', () => {
    it('refuses an unknown code with 400 invalid_invite and creates no user', async () => {
      const body = await signupBody({ invite: secret(`inv_${randomBytes(13).toString('hex')}`) });
      await expectNothingStoredBy(() => signup(body), 400, 'invalid_invite');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a code with no uses left', async () => {
      const code = await inviteCode();
      await sql('update invite_codes set uses_left = 0 where code_hash = ?', [inviteHash(code)]);
      const body = await signupBody({ invite: code });
      await expectNothingStoredBy(() => signup(body), 400, 'invalid_invite');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
      expect(await usesLeft(code)).to.equal(0);
    });

    it('refuses an expired code and does not take its use', async () => {
      const code = await inviteCode({ uses: 3, expiresInDays: 1 });
      await sql(`update invite_codes set expires_at = now() - interval '1 minute' where code_hash = ?`, [inviteHash(code)]);
      const body = await signupBody({ invite: code });
      await expectNothingStoredBy(() => signup(body), 400, 'invalid_invite');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
      expect(await usesLeft(code)).to.equal(3);
    });

    it('accepts a code that has not expired yet', async () => {
      const code = await inviteCode({ expiresInDays: 1 });
      await expectSignedUp(await signupBody({ invite: code }));
      expect(await usesLeft(code)).to.equal(0);
    });

    it('reads codes without regard to case', async () => {
      const code = await inviteCode();
      expect(code.toUpperCase()).to.not.equal(code);
      await expectSignedUp(await signupBody({ invite: secret(code.toUpperCase()) }));
      expect(await usesLeft(code)).to.equal(0);
    });

    it('admits as many accounts as the code has uses, then refuses', async () => {
      const code = await inviteCode({ uses: 2 });
      expect(await usesLeft(code)).to.equal(2);
      await expectSignedUp(await signupBody({ invite: code }));
      expect(await usesLeft(code)).to.equal(1);
      await expectSignedUp(await signupBody({ invite: code }));
      expect(await usesLeft(code)).to.equal(0);

      const third = await signupBody({ invite: code });
      await expectNothingStoredBy(() => signup(third), 400, 'invalid_invite');
      expect(await usersNamed(third.username, third.email)).to.equal(0);
    });

    it('gives the use back when the sign-up is refused for another reason (username_taken)', async () => {
      const existing = await signUp();
      const code = await inviteCode();
      const body = await signupBody({ username: existing.username, invite: code });
      await expectNothingStoredBy(() => signup(body), 409, 'username_taken');
      expect(await usesLeft(code)).to.equal(1);
      // The use is really there: the same code still admits one account.
      await expectSignedUp(await signupBody({ invite: code }));
      expect(await usesLeft(code)).to.equal(0);
    });

    it('admits exactly one of ten concurrent sign-ups racing for a single-use code', async () => {
      const code = await inviteCode();
      const bodies = await Promise.all(Array.from({ length: 10 }, () => signupBody({ invite: code })));
      const before = await snapshot();
      const answers = await Promise.all(bodies.map((body) => signup(body)));
      for (const answer of answers) if (answer.status === 201) secret(answer.json.data.token);
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).to.deep.equal([201, 400, 400, 400, 400, 400, 400, 400, 400, 400]);
      for (const answer of answers.filter((a) => a.status !== 201)) expectError(answer, 400, 'invalid_invite');

      const names = bodies.map((b) => b.username);
      const rows = await sql<{ username: string }>(
        `select username from users where username in (${names.map(() => '?').join(', ')})`,
        names,
      );
      expect(rows).to.have.length(1);
      const winner = answers.find((a) => a.status === 201)!;
      expect(rows[0]!.username).to.equal(winner.json.data.user.username);
      expect(await usesLeft(code)).to.equal(0);
      const after = await snapshot();
      expect(after.users).to.equal(before.users + 1);
      expect(after.sessions).to.equal(before.sessions + 1);
    });
  });

  describe('uniqueness', () => {
    let existing: TestUser;
    before(async () => {
      existing = await signUp({ username: uniqueName('taken'), email: `${uniqueName('taken')}@example.com` });
    });

    it('refuses a taken username with 409 username_taken and stores nothing', async () => {
      const body = await signupBody({ username: existing.username });
      await expectNothingStoredBy(() => signup(body), 409, 'username_taken');
      expect(await usesLeft(body.invite)).to.equal(1);
      expect(await usersNamed(existing.username, body.email)).to.equal(1);
    });

    it('refuses a username that differs from a taken one only by case', async () => {
      const body = await signupBody({ username: existing.username.toUpperCase() });
      await expectNothingStoredBy(() => signup(body), 409, 'username_taken');
    });

    it('refuses a taken email address with 409 email_taken and stores nothing', async () => {
      const body = await signupBody({ email: existing.email });
      await expectNothingStoredBy(() => signup(body), 409, 'email_taken');
      expect(await usersNamed(body.username, 'nobody@nowhere.invalid')).to.equal(0);
    });

    it('refuses an email address that differs from a taken one only by case', async () => {
      const body = await signupBody({ email: existing.email.toUpperCase() });
      await expectNothingStoredBy(() => signup(body), 409, 'email_taken');
      expect(await usersNamed(body.username, 'nobody@nowhere.invalid')).to.equal(0);
    });
  });

  describe('validation: 400 invalid_request pointing at the field, and nothing stored', () => {
    const cases: { rule: string; overrides: (username: string) => Record<string, unknown>; omit?: string; path: string }[] = [
      { rule: 'a username of 2 characters', overrides: () => ({ username: 'ab' }), path: '/body/username' },
      {
        rule: 'a username with characters outside [A-Za-z0-9_-]',
        overrides: (u) => ({ username: `${u.slice(0, 20)}.x!` }),
        path: '/body/username',
      },
      {
        rule: 'a username of 33 characters',
        overrides: () => ({ username: `u${randomBytes(16).toString('hex')}` }),
        path: '/body/username',
      },
      { rule: 'an email address that is not one', overrides: (u) => ({ email: `${u}.example.com` }), path: '/body/email' },
      { rule: 'a password of 7 characters', overrides: () => ({ password: secret('pw-1234') }), path: '/body/password' },
      {
        rule: 'a password of 40 characters but 80 bytes in UTF-8 (over bcrypt’s 72)',
        overrides: () => ({ password: secret('é'.repeat(40)) }),
        path: '/body/password',
      },
      { rule: 'a missing field (email)', overrides: () => ({}), omit: 'email', path: '/body/email' },
      { rule: 'a field the contract does not define', overrides: () => ({ is_admin: true }), path: '/body/is_admin' },
      { rule: 'a number where a string is expected', overrides: () => ({ username: 12345678 }), path: '/body/username' },
    ];

    for (const { rule, overrides, omit, path } of cases) {
      it(`refuses ${rule}`, async () => {
        const username = uniqueName();
        const body: Record<string, unknown> = await signupBody({ username, email: `${username}@example.com`, ...overrides(username) });
        if (omit) delete body[omit];
        const before = await snapshot();
        const answer = await signup(body);
        expectInvalid(answer, path);
        expect(await usersNamed(username, `${username}@example.com`)).to.equal(0);
        expect(await snapshot()).to.deep.equal(before);
      });
    }

    it('checks the edge lengths: a username of 3 and of 32 characters, a password of 8 and of 72 bytes, are accepted', async () => {
      const short = `a${randomBytes(1).toString('hex')}`;
      const long = `${uniqueName('x')}${'z'.repeat(32)}`.slice(0, 32);
      for (const [username, password] of [
        [short, secret(`${randomBytes(4).toString('hex')}`)],
        [long, secret(`${'é'.repeat(30)}${randomBytes(6).toString('hex')}`)],
      ] as const) {
        expect(Buffer.byteLength(password)).to.be.oneOf([8, 72]);
        await expectSignedUp(await signupBody({ username, email: `${username}@example.com`, password }));
        const session = await login({ login: username, password });
        expect(session.status).to.equal(201);
        secret(session.json.data.token);
      }
    });
  });

  describe('the body on the wire', () => {
    it('refuses Content-Type: text/plain with 415 unsupported_media_type', async () => {
      const body = await signupBody();
      await expectNothingStoredBy(
        () => http('POST', '/v1/auth/signup', { headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(body) }),
        415,
        'unsupported_media_type',
      );
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses malformed JSON with 400 invalid_request', async () => {
      const body = await signupBody();
      const answer = await expectNothingStoredBy(
        () => http('POST', '/v1/auth/signup', { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body).slice(0, -1) }),
        400,
        'invalid_request',
      );
      expect(answer.json.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['/body']);
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a request with no body with 400 invalid_request', async () => {
      const answer = await expectNothingStoredBy(
        () => http('POST', '/v1/auth/signup', { headers: { 'Content-Type': 'application/json' } }),
        400,
        'invalid_request',
      );
      expect(answer.json.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['/body']);
      const bare = await expectNothingStoredBy(() => http('POST', '/v1/auth/signup'), 400, 'invalid_request');
      expect(bare.json.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['/body']);
    });

    it('refuses a JSON array with 400 invalid_request', async () => {
      const body = await signupBody();
      await expectNothingStoredBy(() => signup([body]), 400, 'invalid_request');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a body of 2 MiB with 413 payload_too_large', async () => {
      const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
      await expectNothingStoredBy(() => signup(body), 413, 'payload_too_large');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a chunked body (no Content-Length) that grows past 1 MiB with 413 payload_too_large', async () => {
      const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
      const before = await snapshot();
      const { responses } = await oversizedThenFollowUp(JSON.stringify(body), false);
      const first = responses[0]!;
      expectError(
        { status: first.status, headers: new Headers(first.headers), text: first.body, json: JSON.parse(first.body) },
        413,
        'payload_too_large',
      );
      expect(await snapshot()).to.deep.equal(before);
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('after refusing a chunked body with 413, answers the next request on the same connection or closes it', async function () {
      this.timeout(10_000);
      const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
      const { responses, ending } = await oversizedThenFollowUp(JSON.stringify(body), true);
      const [first, second] = responses;
      expect(first!.status).to.equal(413);
      if ((first!.headers.connection ?? '').toLowerCase() === 'close') return; // the client is told not to reuse the connection
      expect(
        second?.status,
        `the 413 said "Connection: ${first!.headers.connection}", but a GET /v1 sent next on that connection got ${
          second ? `status ${second.status}` : `no answer (${ending})`
        }`,
      ).to.equal(200);
    });

    it(
      'refuses a body whose Content-Length is over 1 MiB with 413 while it is still being sent, without resetting the connection, and ' +
        'answers the next request on it',
      async function () {
        this.timeout(10_000);
        const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
        const before = await snapshot();
        const { responses, ending } = await oversizedThenFollowUp(JSON.stringify(body), true, 'length');
        expect(
          responses.map((r) => r.status),
          ending,
        ).to.deep.equal([413, 200]);
        expect(responses[0]!.headers.connection ?? 'keep-alive').to.not.equal('close');
        expect(JSON.parse(responses[0]!.body).error.code).to.equal('payload_too_large');
        expect(await snapshot()).to.deep.equal(before);
      },
    );

    it('accepts application/json with a charset parameter', async () => {
      const answer = await http('POST', '/v1/auth/signup', {
        headers: { 'Content-Type': 'application/json; charset=utf-8' },
        body: JSON.stringify(await signupBody()),
      });
      expect(answer.status, answer.text).to.equal(201);
      secret(answer.json.data.token);
    });
  });

  describe('callers who already hold a credential', () => {
    let holder: TestUser;
    before(async () => {
      holder = await signUp();
    });

    it('refuses a valid session token with 403 already_authenticated and stores nothing', async () => {
      const body = await signupBody();
      await expectNothingStoredBy(() => signup(body, { Authorization: `Bearer ${holder.token}` }), 403, 'already_authenticated');
      expect(await usesLeft(body.invite)).to.equal(1);
    });

    it('refuses a valid API token with 403 already_authenticated and stores nothing', async () => {
      const token = await apiToken(holder.token);
      const body = await signupBody();
      await expectNothingStoredBy(() => signup(body, { Authorization: `Token ${token}` }), 403, 'already_authenticated');
      expect(await usesLeft(body.invite)).to.equal(1);
    });

    it('refuses an invalid token with 401 unauthenticated and stores nothing', async () => {
      const body = await signupBody();
      await expectNothingStoredBy(() => signup(body, { Authorization: `Bearer ${secret(randomToken())}` }), 401, 'unauthenticated');
      expect(await usesLeft(body.invite)).to.equal(1);
    });
  });
});

describe('POST /v1/auth/login', () => {
  let user: TestUser;
  before(async () => {
    user = await signUp({ username: uniqueName('Login'), email: `${uniqueName('login')}@Example.com` });
  });

  async function expectNewWorkingSession(answer: Answer): Promise<string> {
    expect(answer.status, JSON.stringify(answer.json)).to.equal(201);
    expect(answer.json.success).to.equal(true);
    expect(answer.json.data).to.have.all.keys('token', 'expires_at', 'user');
    const token = secret(answer.json.data.token as string);
    expect(token).to.match(SESSION_TOKEN);
    expect(token).to.not.equal(user.token);
    expect(answer.json.data.user).to.deep.equal((await me(`Bearer ${user.token}`)).json.data);
    const mine = await me(`Bearer ${token}`);
    expect(mine.status).to.equal(200);
    expect(mine.json.data.id).to.equal(user.id);
    const rows = await sql('select id from sessions where token_hash = ? and user_id = ?', [sha256(token), user.id]);
    expect(rows).to.have.length(1);
    return token;
  }

  it('signs in by username in any case with a new, different session token', async () => {
    const upper = await expectNewWorkingSession(await login({ login: user.username.toUpperCase(), password: user.password }));
    const lower = await expectNewWorkingSession(await login({ login: user.username, password: user.password }));
    expect(lower).to.not.equal(upper);
  });

  it('signs in by email address in any case', async () => {
    await expectNewWorkingSession(await login({ login: user.email.toUpperCase(), password: user.password }));
    await expectNewWorkingSession(await login({ login: user.email.toLowerCase(), password: user.password }));
  });

  it('records the device of the new session', async () => {
    const userAgent = `login-device/${uniqueName('ua')}`;
    const { data, response } = await client().POST('/v1/auth/login', {
      body: { login: user.username, password: user.password },
      headers: { 'User-Agent': userAgent },
    });
    expect(response.status).to.equal(201);
    const token = secret(data!.data.token);
    const [row] = await sql<{ user_agent: string; ip: string; expires_at: Date }>(
      'select user_agent, ip, expires_at from sessions where token_hash = ?',
      [sha256(token)],
    );
    expect(row!.user_agent).to.equal(userAgent);
    expect(row!.ip).to.match(/127\.0\.0\.1$|^::1$/);
    expectCloseTo(row!.expires_at, Date.now() + 30 * DAY_MS, 60_000, 'sessions.expires_at');
  });

  it('ignores any Authorization header', async () => {
    await expectNewWorkingSession(await login({ login: user.username, password: user.password }, { Authorization: 'Basic garbage' }));
    await expectNewWorkingSession(
      await login({ login: user.username, password: user.password }, { Authorization: `Bearer ${user.token}` }),
    );
  });

  it('answers a wrong password and an unknown user with the same 401 invalid_credentials, and opens no session', async () => {
    const before = await snapshot();
    const wrong = await login({ login: user.username, password: secret(`${user.password}x`) });
    const unknown = await login({ login: uniqueName('nobody'), password: user.password });
    const unknownEmail = await login({ login: `${uniqueName('nobody')}@example.com`, password: user.password });
    for (const answer of [wrong, unknown, unknownEmail]) {
      expectError(answer, 401, 'invalid_credentials');
      expect(answer.json).to.deep.equal(wrong.json);
      expect(answer.headers.get('www-authenticate')).to.equal('Bearer');
    }
    expect(await snapshot()).to.deep.equal(before);
  });

  // Class: a rule of sign-up that login must keep too. bcrypt reads 72 bytes and no more, so nothing may match on those alone.
  it(
    'refuses a password of the right 72 bytes plus anything as a wrong password (401 invalid_credentials), opening no ' + 'session',
    async () => {
      const password = secret(`${randomBytes(24).toString('hex')}${'é'.repeat(12)}`);
      expect(Buffer.byteLength(password)).to.equal(72);
      const long = await signUp({ password });
      const before = await snapshot();
      for (const extra of ['x', 'anything at all', 'é']) {
        const answer = await login({ login: long.username, password: secret(password + extra) });
        expectError(answer, 401, 'invalid_credentials');
      }
      expect(await snapshot()).to.deep.equal(before);
      const exact = await login({ login: long.username, password });
      expect(exact.status).to.equal(201);
      expect(exact.json.data.user.id).to.equal(long.id);
      secret(exact.json.data.token as string);
    },
  );

  it('takes about as long for an unknown user as for a wrong password (bcrypt at its default cost)', async function () {
    this.timeout(60_000);
    // The run's servers hash at the lowest cost, where a skipped hash would hide in the noise: this one hashes as deployed.
    const server = await startExtraServer({ BCRYPT_ROUNDS: '10', HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' });
    try {
      const known = await signUpOn(server);
      const wrong: number[] = [];
      const unknown: number[] = [];
      const timed = async (body: unknown, into: number[]) => {
        const started = performance.now();
        const answer = await callAt(server.url, 'POST', '/v1/auth/login', undefined, body);
        into.push(performance.now() - started);
        expect(answer.status).to.equal(401);
      };
      for (let i = 0; i < 5; i++) {
        await timed({ login: known.username, password: secret(`wrong-${randomBytes(6).toString('hex')}`) }, wrong);
        await timed({ login: uniqueName('ghost'), password: secret(`wrong-${randomBytes(6).toString('hex')}`) }, unknown);
      }
      const ratio = median(unknown) / median(wrong);
      expect(ratio, `median unknown ${median(unknown).toFixed(1)} ms, wrong password ${median(wrong).toFixed(1)} ms`).to.be.within(
        1 / 3,
        3,
      );
    } finally {
      await server.close();
    }
  });

  it('validates its body: a missing password is 400 invalid_request', async () => {
    await expectNothingStoredBy(() => login({ login: user.username }), 400, 'invalid_request');
  });
});

describe('DELETE /v1/auth/logout', () => {
  it('answers 204 with no body, ends only the calling session, and deletes its device record', async () => {
    const user = await signUp({ userAgent: 'logout-device/1' });
    const session = await login({ login: user.username, password: user.password });
    expect(session.status).to.equal(201);
    const other = secret(session.json.data.token as string);
    const [device] = await sql<{ user_agent: string; ip: string }>('select user_agent, ip from sessions where token_hash = ?', [
      sha256(user.token),
    ]);
    expect(device).to.deep.include({ user_agent: 'logout-device/1' });
    expect(device!.ip).to.be.a('string').and.not.be.empty;

    const answer = await call('DELETE', '/v1/auth/logout', user.token);
    expect(answer.status).to.equal(204);
    expect(answer.text).to.equal('');

    expectError(await me(`Bearer ${user.token}`), 401, 'unauthenticated');
    const still = await me(`Bearer ${other}`);
    expect(still.status).to.equal(200);
    expect(still.json.data.id).to.equal(user.id);
    expect(await sql('select id from sessions where token_hash = ?', [sha256(user.token)])).to.have.length(0);
    expect(await sql('select id from sessions where user_agent = ? and user_id = ?', ['logout-device/1', user.id])).to.have.length(0);
    const left = await sql<{ token_hash: string }>('select token_hash from sessions where user_id = ?', [user.id]);
    expect(left.map((r) => r.token_hash)).to.deep.equal([sha256(other)]);

    // A second logout with the same token is 401: the session is gone.
    expectError(await call('DELETE', '/v1/auth/logout', user.token), 401, 'unauthenticated');
  });

  it('refuses an API token with 403 session_required and leaves every session in place', async () => {
    const user = await signUp();
    const token = await apiToken(user.token);
    const before = await snapshot();
    const sessions = await sql('select * from sessions where user_id = ?', [user.id]);
    const answer = await call('DELETE', '/v1/auth/logout', token);
    expectError(answer, 403, 'session_required');
    expect(await sql('select * from sessions where user_id = ?', [user.id])).to.deep.equal(sessions);
    expect(await snapshot()).to.deep.equal(before);
    expect((await me(`Bearer ${user.token}`)).status).to.equal(200);
    expect((await me(`Bearer ${token}`)).status).to.equal(200);
  });

  it('answers 401 unauthenticated without a credential', async () => {
    await expectNothingStoredBy(() => http('DELETE', '/v1/auth/logout'), 401, 'unauthenticated');
  });
});

describe('the Authorization header', () => {
  let user: TestUser;
  before(async () => {
    user = await signUp();
  });

  for (const scheme of ['Bearer', 'Token', 'bearer', 'TOKEN']) {
    it(`accepts the scheme word "${scheme}"`, async () => {
      const answer = await me(`${scheme} ${user.token}`);
      expect(answer.status, JSON.stringify(answer.json)).to.equal(200);
      expect(answer.json.data.id).to.equal(user.id);
    });
  }

  const refused: [string, () => string][] = [
    ['the Basic scheme', () => 'Basic abc'],
    ['a scheme with no token', () => 'Bearer'],
    ['a token nobody was given', () => `Bearer ${secret(randomToken())}`],
    ['an API-token-shaped unknown token', () => `Token ${secret(randomToken('api_'))}`],
    ['a token without a kind prefix', () => 'Bearer abcdef'],
    ['two words after the scheme', () => 'Bearer a b'],
    ['a valid token followed by another word', () => `Bearer ${user.token} extra`],
    ['a valid token with no scheme', () => user.token],
  ];
  for (const [rule, header] of refused) {
    it(`refuses ${rule} with 401 unauthenticated and WWW-Authenticate: Bearer`, async () => {
      expectError(await me(header()), 401, 'unauthenticated');
    });
  }

  it('refuses a missing header with 401 unauthenticated', async () => {
    expectError(await me(), 401, 'unauthenticated');
  });

  it('refuses an expired session with 401 and does not bring it back to life', async () => {
    const other = await signUp();
    expect((await me(`Bearer ${other.token}`)).status).to.equal(200);
    await sql(`update sessions set expires_at = now() - interval '1 second' where token_hash = ?`, [sha256(other.token)]);
    expectError(await me(`Bearer ${other.token}`), 401, 'unauthenticated');
    const [row] = await sql<{ live: boolean }>('select expires_at > now() as live from sessions where token_hash = ?', [
      sha256(other.token),
    ]);
    if (row) expect(row.live).to.equal(false);
    expectError(await me(`Bearer ${other.token}`), 401, 'unauthenticated');
  });

  it('extends a session to 30 days from its last use', async () => {
    const other = await signUp();
    await sql(`update sessions set expires_at = now() + interval '1 day', last_used_at = now() - interval '2 days' where token_hash = ?`, [
      sha256(other.token),
    ]);
    expect((await me(`Bearer ${other.token}`)).status).to.equal(200);
    const [row] = await sql<{ expires_at: Date; last_used_at: Date }>(
      'select expires_at, last_used_at from sessions where token_hash = ?',
      [sha256(other.token)],
    );
    expectCloseTo(row!.last_used_at, Date.now(), 60_000, 'last_used_at');
    expectCloseTo(row!.expires_at, Date.now() + 30 * DAY_MS, 60_000, 'expires_at');
  });
});

describe('GET /v1/users/me', () => {
  it('answers 200 with exactly id, username, email, icon and created_at of the caller', async () => {
    const username = uniqueName('MeCase');
    const email = `${username}@Example.org`;
    const password = newPassword();
    const signup = await client().POST('/v1/auth/signup', { body: { username, email, password, invite: await inviteCode() } });
    expect(signup.response.status).to.equal(201);
    const token = secret(signup.data!.data.token);

    const { data, response } = await client(token).GET('/v1/users/me');
    expect(response.status).to.equal(200);
    expect(data).to.have.all.keys('success', 'data');
    expect(data!.success).to.equal(true);
    expect(data!.data).to.have.all.keys('id', 'username', 'email', 'icon', 'created_at');
    expect(data!.data).to.deep.equal(signup.data!.data.user);
    expect(data!.data).to.deep.include({ username: username.toLowerCase(), email, icon: null });
    const [row] = await sql<{ id: string; created_at: Date }>('select id, created_at from users where id = ?', [data!.data.id]);
    expect(new Date(row!.created_at).toISOString()).to.equal(data!.data.created_at);
  });

  it('answers the same for an API token of the same user', async () => {
    const user = await signUp();
    const token = await apiToken(user.token);
    const bySession = await me(`Bearer ${user.token}`);
    const byApiToken = await me(`Bearer ${token}`);
    expect(byApiToken.status).to.equal(200);
    expect(byApiToken.json).to.deep.equal(bySession.json);
  });
});
