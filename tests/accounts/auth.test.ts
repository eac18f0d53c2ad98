/**
 * Login, logout, the Authorization header and GET /v1/users/me. Every refusal is checked for its exact
 * status and code, and for what it left in the database (nothing). Sign-up is in auth-signup.test.ts,
 * and its body on the wire in auth-signup-body.test.ts.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { randomToken } from '../../tools/src/conformance/case.js';
import { client, secret, sha256, sql, startExtraServer } from '../support/harness.js';
import { apiToken, inviteCode, signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import { call, callAt, DAY_MS, expectCloseTo, expectError, http, type Answer } from '../support/http.js';
import { expectNothingStoredBy, login, me, newPassword, SESSION_TOKEN, snapshot } from './auth-support.js';

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

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
