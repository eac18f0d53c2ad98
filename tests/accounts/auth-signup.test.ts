/**
 * Sign-up (POST /v1/auth/signup): a valid one, invite codes, uniqueness, validation, and callers who
 * already hold a credential. Every refusal is checked for its exact status and code, and for what it
 * left in the database (nothing).
 */
import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { randomBytes } from 'node:crypto';
import { randomToken } from '../../tools/src/conformance/case.js';
import { client, secret, sha256, sql } from '../support/harness.js';
import { apiToken, inviteCode, signUp, uniqueName, type TestUser } from '../support/accounts.js';
import { DAY_MS, expectCloseTo, expectError, expectInvalid, ISO_UTC, UUID7 } from '../support/http.js';
import {
  expectNothingStoredBy,
  expectSignedUp,
  inviteHash,
  login,
  me,
  newPassword,
  SESSION_TOKEN,
  signup,
  signupBody,
  snapshot,
  usersNamed,
  usesLeft,
} from './auth-support.js';

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
