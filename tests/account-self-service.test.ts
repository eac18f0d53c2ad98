/**
 * Accounts: self-service. Changing one's username, email address and icon (`PATCH /v1/users/me`),
 * one's password (`PUT /v1/users/me/password`), and listing and ending one's sessions
 * (`/v1/auth/sessions`): every rule and refusal, with what is and is not in the database afterwards.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pino from 'pino';
import { loadConfig } from '../server/src/config.js';
import { DatabaseIconRows } from '../server/src/domain/icons.js';
import { Maintenance, MAINTENANCE_DEFAULTS } from '../server/src/maintenance/prune.js';
import { IconStore } from '../server/src/storage/icons.js';
import { apiToken, signUp, signUpOn, uniqueName, type TestUser } from './support/accounts.js';
import { baseUrl, count, database, secret, sha256, sql, startRateLimitedServer } from './support/harness.js';
import { call, callAt, expectData, expectError, expectInvalid, expectNoContent, ISO_UTC, UUID7 } from './support/http.js';
import { addMember, createProject, iconUrl, invite, projectPath } from './support/projects.js';
import { notPng, png, storedIcon } from './support/png.js';
import { RawStream } from './support/sse.js';

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

async function sessionIds(userId: string): Promise<string[]> {
  return (await sql<{ id: string }>('select id from sessions where user_id = ? order by id', [userId])).map((row) => row.id);
}

describe('accounts: self-service', () => {
  describe('PATCH /v1/users/me', () => {
    let user: TestUser;
    beforeEach(async () => {
      user = await signUp();
    });

    it('changes the username (stored lower-case) and the email address; GET /v1/users/me shows them', async () => {
      const username = uniqueName('renamed');
      const email = `${username}@Example.COM`;
      const changed = expectData(await call('PATCH', ME, user.token, { username: username.toUpperCase(), email }));
      expect(changed).to.deep.include({ id: user.id, username, email, icon: null });
      expect(changed.created_at).to.match(ISO_UTC);
      expect(expectData(await call('GET', ME, user.token))).to.deep.equal(changed);
      expect(await userRow(user.id)).to.include({ username, email, icon: null });
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

    it('refuses an unknown field, a bad username, email or icon with 400, changing nothing', async () => {
      const before = await userRow(user.id);
      const icons = await count('select count(*)::int as n from icons');
      expectInvalid(await call('PATCH', ME, user.token, { username: uniqueName(), password: 'x'.repeat(10) }), '/body/password');
      expectInvalid(await call('PATCH', ME, user.token, { username: 'no spaces allowed' }), '/body/username');
      expectInvalid(await call('PATCH', ME, user.token, { username: 'ab' }), '/body/username');
      expectInvalid(await call('PATCH', ME, user.token, { email: 'not an address' }), '/body/email');
      expectInvalid(
        await call('PATCH', ME, user.token, { username: uniqueName(), icon: DATA_URL + notPng.toString('base64') }),
        '/body/icon',
      );
      // The update form of an icon is a data URL: bare Base64 is refused.
      expectInvalid(await call('PATCH', ME, user.token, { icon: png(8, 8).toString('base64') }), '/body/icon');
      expect(await userRow(user.id)).to.deep.equal(before);
      expect(await count('select count(*)::int as n from icons')).to.equal(icons);
    });

    it('409 username_taken and email_taken without regard to case, changing nothing', async () => {
      const other = await signUp();
      const before = await userRow(user.id);
      expectError(await call('PATCH', ME, user.token, { username: other.username.toUpperCase() }), 409, 'username_taken');
      expectError(await call('PATCH', ME, user.token, { email: other.email.toUpperCase() }), 409, 'email_taken');
      // A taken field refuses the whole change.
      expectError(await call('PATCH', ME, user.token, { username: uniqueName(), email: other.email }), 409, 'email_taken');
      expect(await userRow(user.id)).to.deep.equal(before);
      // One's own name and address, in another case, are not taken.
      const same = expectData(
        await call('PATCH', ME, user.token, { username: user.username.toUpperCase(), email: user.email.toUpperCase() }),
      );
      expect(same).to.include({ username: user.username, email: user.email.toUpperCase() });
    });

    it('two users racing to take one name: one gets it, the other 409', async () => {
      const other = await signUp();
      const name = uniqueName('race');
      const answers = await Promise.all([user, other].map((u) => call('PATCH', ME, u.token, { username: name })));
      expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 409]);
      expect(answers.find((a) => a.status === 409)!.json.error.code).to.equal('username_taken');
      expect(await count('select count(*)::int as n from users where username = ?', [name])).to.equal(1);
    });

    it('an API token may change the account too', async () => {
      const token = await apiToken(user.token);
      const username = uniqueName('bytoken');
      expect(expectData(await call('PATCH', ME, token, { username }))).to.include({ username });
      expect(await userRow(user.id)).to.include({ username });
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
      const server = await startRateLimitedServer({ AUTH_RATE_LIMIT: '3' });
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
