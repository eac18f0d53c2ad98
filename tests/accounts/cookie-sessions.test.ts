/**
 * Sessions in the session cookie (`cookie: true` on login and sign-up), as the web console holds
 * them: `sb_session` over plain HTTP, `__Host-sb_session` over HTTPS; the cookie's attributes and
 * the body without its token; the cookie honoured from the service's own origin only (a read, a
 * write, the live stream), and refused with 403 `csrf_refused`, changing nothing, from anywhere
 * else; a request with two session cookies (one tossed in by another origin of the host) refused
 * with 401, changing nothing; `Authorization` winning over it; logout, the session list, an ended
 * session and a password change; the rate limit by user. And the first run: a service on a
 * database without an account logs a code to create the first one with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { inviteCode, signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import {
  baseUrl,
  count,
  database,
  freshPostgresDatabase,
  secret,
  sha256,
  sql,
  startExtraServer,
  startRateLimitedServer,
} from '../support/harness.js';
import { call, callAt, expectData, expectError, expectNoContent, http, type Answer } from '../support/http.js';
import { namespaceName, projectPath } from '../support/projects.js';
import { RawStream } from '../support/sse.js';

const SAME_ORIGIN = { 'Sec-Fetch-Site': 'same-origin' };
const LIFETIME = 30 * 24 * 60 * 60;
const SET = new RegExp(`^sb_session=(ses_[A-Za-z0-9_-]{43}); HttpOnly; SameSite=Strict; Path=/; Max-Age=${LIFETIME}$`);
const CLEARED = 'sb_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0';
/** Over HTTPS: the cookie's name carries the `__Host-` prefix (Secure, Path=/, no Domain). */
const SET_OVER_HTTPS = new RegExp(
  `^__Host-sb_session=(ses_[A-Za-z0-9_-]{43}); HttpOnly; SameSite=Strict; Path=/; Max-Age=${LIFETIME}; Secure$`,
);
const CLEARED_OVER_HTTPS = '__Host-sb_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure';
const TWO_COOKIES_MESSAGE =
  'The request carried more than one session cookie, so none was used; clear this site’s cookies and sign in again.';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };
/** And cheap bcrypt, where what is tested is not a password's hash. */
const QUICK = { ...CLOSES_AT_ONCE, BCRYPT_ROUNDS: '4' };

/** The session token an answer set as its cookie (registered as a secret), after checking the cookie's attributes. */
function cookieSet(answer: Answer, pattern = SET): string {
  const cookies = answer.headers.getSetCookie();
  expect(cookies, 'Set-Cookie').to.have.length(1);
  const token = pattern.exec(cookies[0]!)?.[1];
  expect(token, `Set-Cookie: ${cookies[0]}`).to.be.a('string');
  return secret(token);
}

/** The headers of a request a page of the service sends with its cookie. */
function withCookie(token: string, from: Record<string, string> = SAME_ORIGIN): Record<string, string> {
  return { Cookie: `sb_session=${token}`, ...from };
}

async function cookieLogin(user: Pick<TestUser, 'username' | 'password'>, origin = baseUrl(), headers: Record<string, string> = {}) {
  const answer = await callAt(
    origin,
    'POST',
    '/v1/auth/login',
    undefined,
    { login: user.username, password: user.password, cookie: true },
    headers,
  );
  return { answer, data: expectData(answer, 201) };
}

async function sessionIdOf(token: string): Promise<string | undefined> {
  const [row] = await sql<{ id: string }>('select id from sessions where token_hash = ?', [sha256(token)]);
  return row?.id;
}

describe('sessions in the session cookie', function () {
  this.timeout(60_000);
  let ada: TestUser;

  before(async () => {
    ada = await signUp();
  });

  it('login with cookie: true sets an HttpOnly, SameSite=Strict cookie for the session and leaves the token out of the body', async () => {
    const before = await count('select count(*)::int from sessions where user_id = ?', [ada.id]);
    const { answer, data } = await cookieLogin(ada);
    const token = cookieSet(answer);
    expect(Object.keys(data).sort()).to.deep.equal(['expires_at', 'user']);
    expect(data.user).to.include({ id: ada.id, username: ada.username });
    expect(answer.text).not.to.contain(token);
    // A session like any other: a row of its user, stored as a hash, expiring in 30 days.
    expect(await count('select count(*)::int from sessions where user_id = ?', [ada.id])).to.equal(before + 1);
    const [row] = await sql<{ user_id: string; expires_at: Date }>('select user_id, expires_at from sessions where token_hash = ?', [
      sha256(token),
    ]);
    expect(row!.user_id).to.equal(ada.id);
    expect(Math.abs(new Date(row!.expires_at).getTime() - new Date(data.expires_at).getTime())).to.be.lessThan(1000);

    // Without it (or with false), the token in the body and no cookie, as before.
    for (const body of [{}, { cookie: false }]) {
      const plain = await call('POST', '/v1/auth/login', undefined, { login: ada.username, password: ada.password, ...body });
      const session = expectData(plain, 201);
      expect(secret(session.token as string)).to.match(/^ses_[A-Za-z0-9_-]{43}$/);
      expect(plain.headers.getSetCookie()).to.deep.equal([]);
    }
    // Over plain HTTP, no Secure: X-Forwarded-Proto counts only behind a trusted proxy (TRUST_PROXY).
    const forwarded = await cookieLogin(ada, baseUrl(), { 'X-Forwarded-Proto': 'https' });
    cookieSet(forwarded.answer);
    expectError(
      await call('POST', '/v1/auth/login', undefined, { login: ada.username, password: ada.password, cookie: 'yes' }),
      400,
      'invalid_request',
    );
  });

  it('sign-up with cookie: true does the same for the new account', async () => {
    const username = uniqueName('cookie');
    const body = {
      username,
      email: `${username}@example.com`,
      password: secret('cookie sign-up pw'),
      invite: await inviteCode(),
      cookie: true,
    };
    const answer = await call('POST', '/v1/auth/signup', undefined, body);
    const data = expectData(answer, 201);
    const token = cookieSet(answer);
    expect(Object.keys(data).sort()).to.deep.equal(['expires_at', 'user']);
    expect(data.user.username).to.equal(username);
    const [row] = await sql<{ username: string }>(
      'select u.username from sessions s join users u on u.id = s.user_id where s.token_hash = ?',
      [sha256(token)],
    );
    expect(row!.username).to.equal(username);
    expect(expectData(await call('GET', '/v1/users/me', undefined, undefined, withCookie(token))).username).to.equal(username);
  });

  it('authenticates a read, a write and the live stream from the same origin (Sec-Fetch-Site, or an Origin equal to the service)', async () => {
    const { answer } = await cookieLogin(ada);
    const token = cookieSet(answer);
    expect(expectData(await call('GET', '/v1/users/me', undefined, undefined, withCookie(token))).id).to.equal(ada.id);
    expect(expectData(await call('GET', '/v1/users/me', undefined, undefined, withCookie(token, { Origin: baseUrl() }))).id).to.equal(
      ada.id,
    );

    const namespace = namespaceName('cookie');
    const created = expectData(await call('POST', '/v1/projects', undefined, { name: 'By cookie', namespace }, withCookie(token)), 201);
    expect(created.namespace).to.equal(namespace);
    expect(await count('select count(*)::int from projects where namespace = ?', [namespace])).to.equal(1);

    // EventSource sends the cookie and Sec-Fetch-Site: same-origin.
    const stream = await RawStream.open(`${baseUrl()}${projectPath(namespace, '/events/stream')}`, { headers: withCookie(token) });
    try {
      expect(stream.response.status).to.equal(200);
      expect(stream.response.headers.get('content-type')).to.match(/^text\/event-stream/);
      await stream.until(() => stream.retry !== undefined, 5_000); // subscribed
      expectData(await call('POST', projectPath(namespace, '/feeds/general/events'), ada.token, { event: 'Seen by the cookie' }), 201);
      const [event] = await stream.waitForEvents(1);
      expect(JSON.parse(event!.data).event).to.equal('Seen by the cookie');
    } finally {
      stream.close();
    }
    // A session-only operation takes it: it is a session.
    expectData(await call('GET', '/v1/auth/tokens', undefined, undefined, withCookie(token)));
  });

  it('refuses the cookie from another origin, or from nowhere it can tell, with 403 csrf_refused, and does nothing', async () => {
    const { answer } = await cookieLogin(ada);
    const token = cookieSet(answer);
    const projects = await count('select count(*)::int from projects');
    const [before] = await sql<{ last_used_at: Date }>('select last_used_at from sessions where token_hash = ?', [sha256(token)]);
    const refusals: Record<string, string>[] = [
      { Origin: 'https://evil.example' },
      { Origin: 'null' },
      { Origin: baseUrl().replace('127.0.0.1', 'localhost') },
      { Origin: `${baseUrl()}.evil.example` },
      { 'Sec-Fetch-Site': 'cross-site' },
      { 'Sec-Fetch-Site': 'same-site' },
      { 'Sec-Fetch-Site': 'none' },
      { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://evil.example' },
      {},
    ];
    for (const from of refusals) {
      const what = JSON.stringify(from);
      expectError(
        await call('POST', '/v1/projects', undefined, { name: 'Forged', namespace: namespaceName('forged') }, withCookie(token, from)),
        403,
        'csrf_refused',
        what,
      );
      expectError(await call('GET', '/v1/users/me', undefined, undefined, withCookie(token, from)), 403, 'csrf_refused', what);
      expectError(await call('DELETE', '/v1/auth/logout', undefined, undefined, withCookie(token, from)), 403, 'csrf_refused', what);
    }
    expect(await count('select count(*)::int from projects')).to.equal(projects);
    expect(await sessionIdOf(token), 'the session, not logged out').to.be.a('string');
    const [after] = await sql<{ last_used_at: Date }>('select last_used_at from sessions where token_hash = ?', [sha256(token)]);
    expect(after!.last_used_at).to.deep.equal(before!.last_used_at);
    // A public route does not look at the cookie at all.
    expect((await http('GET', '/v1', { headers: withCookie(token, { Origin: 'https://evil.example' }) })).status).to.equal(200);
  });

  it('ignores the cookie when the request has Authorization, whatever its origin', async () => {
    const bob = await signUp();
    const { answer } = await cookieLogin(ada);
    const token = cookieSet(answer);
    const me = await call('GET', '/v1/users/me', bob.token, undefined, withCookie(token, { Origin: 'https://evil.example' }));
    expect(expectData(me).id).to.equal(bob.id);
    expectError(await call('GET', '/v1/users/me', 'ses_not_a_session', undefined, withCookie(token)), 401, 'unauthenticated');
    expect((await call('GET', '/v1/users/me', 'ses_not_a_session', undefined, withCookie(token))).headers.getSetCookie()).to.deep.equal([]);
  });

  it('answers a cookie that names no live session 401, clearing it', async () => {
    for (const value of [`ses_${'A'.repeat(43)}`, 'garbage', '', `api_${'A'.repeat(43)}`]) {
      const answer = await call('GET', '/v1/users/me', undefined, undefined, { Cookie: `theme=dark; sb_session=${value}`, ...SAME_ORIGIN });
      expectError(answer, 401, 'unauthenticated', value);
      expect(answer.headers.getSetCookie(), value).to.deep.equal([CLEARED]);
    }
  });

  it('logout by cookie ends the session and clears the cookie', async () => {
    const { answer } = await cookieLogin(ada);
    const token = cookieSet(answer);
    const id = await sessionIdOf(token);
    const out = await call('DELETE', '/v1/auth/logout', undefined, undefined, withCookie(token));
    expectNoContent(out);
    expect(out.headers.getSetCookie()).to.deep.equal([CLEARED]);
    expect(await count('select count(*)::int from sessions where id = ?', [id])).to.equal(0);
    const after = await call('GET', '/v1/users/me', undefined, undefined, withCookie(token));
    expectError(after, 401, 'unauthenticated');
    expect(after.headers.getSetCookie()).to.deep.equal([CLEARED]);
    // A logout by Authorization leaves any cookie alone.
    const bearer = await call('POST', '/v1/auth/login', undefined, { login: ada.username, password: ada.password });
    const out2 = await call('DELETE', '/v1/auth/logout', secret(expectData(bearer, 201).token as string));
    expectNoContent(out2);
    expect(out2.headers.getSetCookie()).to.deep.equal([]);
  });

  it('is listed with the other sessions, and ended by DELETE /v1/auth/sessions/{id}', async () => {
    const { answer } = await cookieLogin(ada);
    const token = cookieSet(answer);
    const id = await sessionIdOf(token);
    const listed = expectData(await call('GET', '/v1/auth/sessions?limit=100', ada.token));
    expect(listed.items.find((s: { id: string }) => s.id === id)).to.include({ id, current: false });
    const own = expectData(await call('GET', '/v1/auth/sessions?limit=100', undefined, undefined, withCookie(token)));
    expect(own.items.find((s: { id: string }) => s.id === id)).to.include({ current: true });
    expectNoContent(await call('DELETE', `/v1/auth/sessions/${id}`, ada.token));
    expectError(await call('GET', '/v1/users/me', undefined, undefined, withCookie(token)), 401, 'unauthenticated');
  });

  it('ends with a password change made elsewhere', async () => {
    const carol = await signUp();
    const { answer } = await cookieLogin(carol);
    const token = cookieSet(answer);
    const password = secret('a new password for carol');
    expectNoContent(await call('PUT', '/v1/users/me/password', carol.token, { current_password: carol.password, new_password: password }));
    expect(await sessionIdOf(token)).to.equal(undefined);
    expectError(await call('GET', '/v1/users/me', undefined, undefined, withCookie(token)), 401, 'unauthenticated');
  });

  it('counts against its user’s rate limit with the user’s other credentials', async () => {
    const limited = await startRateLimitedServer({ API_RATE_LIMIT: '4', ...QUICK });
    try {
      const dave = await signUpOn(limited);
      const { answer } = await cookieLogin(dave, limited.url);
      const token = cookieSet(answer);
      const remaining: (string | null)[] = [];
      for (const byCookie of [true, false, true, false]) {
        const got = byCookie
          ? await callAt(limited.url, 'GET', '/v1/users/me', undefined, undefined, withCookie(token))
          : await callAt(limited.url, 'GET', '/v1/users/me', dave.token);
        expect(got.status).to.equal(200);
        remaining.push(got.headers.get('ratelimit-remaining'));
      }
      expect(remaining).to.deep.equal(['3', '2', '1', '0']);
      expectError(await callAt(limited.url, 'GET', '/v1/users/me', undefined, undefined, withCookie(token)), 429, 'rate_limited');
    } finally {
      await limited.close();
    }
  });

  it('refuses a request with two session cookies (one tossed in by another origin of the host) with 401, doing nothing', async () => {
    const mallory = await signUp();
    const own = cookieSet((await cookieLogin(ada)).answer);
    const tossed = cookieSet((await cookieLogin(mallory)).answer);
    const lastUses = () =>
      sql<{ token_hash: string; last_used_at: Date | null }>(
        'select token_hash, last_used_at from sessions where token_hash in (?, ?) order by token_hash',
        [sha256(own), sha256(tossed)],
      );
    const before = await lastUses();
    const projects = await count('select count(*)::int from projects');
    // A browser sends the cookie of the longer path first: `sb_session=…; Path=/v1` set by the other origin.
    const cookies = [
      `sb_session=${tossed}; sb_session=${own}`,
      `sb_session=${own}; theme=dark; sb_session=${tossed}`,
      `sb_session=${own}; sb_session=${own}`,
      `sb_session=${own}; sb_session=garbage`,
    ];
    for (const cookie of cookies) {
      const headers = { Cookie: cookie, ...SAME_ORIGIN };
      const answers = [
        await call('GET', '/v1/users/me', undefined, undefined, headers),
        await call('POST', '/v1/projects', undefined, { name: 'Tossed', namespace: namespaceName('tossed') }, headers),
        await call('DELETE', '/v1/auth/logout', undefined, undefined, headers),
      ];
      for (const answer of answers) {
        expectError(answer, 401, 'unauthenticated', cookie);
        expect(answer.json.error.message).to.equal(TWO_COOKIES_MESSAGE);
        expect(answer.headers.get('www-authenticate')).to.equal('Bearer');
        // Neither is cleared: the service cannot tell which is whose, and clearing its own would leave the tossed one alone.
        expect(answer.headers.getSetCookie(), cookie).to.deep.equal([]);
      }
    }
    expect(await count('select count(*)::int from projects')).to.equal(projects);
    expect(await lastUses(), 'both sessions live and unused').to.deep.equal(before);
    // From another origin, the origin check comes first; with Authorization, cookies are not looked at.
    const twice = { Cookie: `sb_session=${tossed}; sb_session=${own}` };
    expectError(await call('GET', '/v1/users/me', undefined, undefined, { ...twice, Origin: 'https://evil.example' }), 403, 'csrf_refused');
    expect(expectData(await call('GET', '/v1/users/me', ada.token, undefined, twice)).id).to.equal(ada.id);
    // A public route does not look at them: signing in again works.
    expectData(
      await call('POST', '/v1/auth/login', undefined, { login: ada.username, password: ada.password }, { ...twice, ...SAME_ORIGIN }),
      201,
    );
  });

  it('over HTTPS, as a trusted proxy reports it, is __Host-sb_session (Secure), the only name read, and the Origin to match is the https one', async () => {
    const proxied = await startExtraServer({ TRUST_PROXY: '1', ...QUICK });
    try {
      const [erin, mallory] = await Promise.all([signUpOn(proxied), signUpOn(proxied)]);
      const { answer } = await cookieLogin(erin, proxied.url, { 'X-Forwarded-Proto': 'https' });
      const token = cookieSet(answer, SET_OVER_HTTPS);
      const tossed = cookieSet((await cookieLogin(mallory, proxied.url)).answer); // a plain sb_session, as an http origin sets it
      const tossedUse = () =>
        sql<{ last_used_at: Date | null }>('select last_used_at from sessions where token_hash = ?', [sha256(tossed)], proxied.db);
      const tossedUseBefore = await tossedUse();
      const host = new URL(proxied.url).host;
      const https = { 'X-Forwarded-Proto': 'https', Origin: `https://${host}` };
      const me = (cookie: string, from: Record<string, string> = https) =>
        callAt(proxied.url, 'GET', '/v1/users/me', undefined, undefined, { Cookie: cookie, ...from });
      expect(expectData(await me(`__Host-sb_session=${token}`)).id).to.equal(erin.id);
      // A plain sb_session over HTTPS is not the service's: ignored beside the real one, and alone it is no credential.
      expect(expectData(await me(`sb_session=${tossed}; __Host-sb_session=${token}`)).id).to.equal(erin.id);
      const alone = await me(`sb_session=${tossed}`);
      expectError(alone, 401, 'unauthenticated');
      expect(alone.headers.getSetCookie()).to.deep.equal([]);
      expect(await tossedUse(), 'the tossed session not used').to.deep.equal(tossedUseBefore);
      // Two of the prefixed name are refused as two plain ones are over HTTP.
      const two = await me(`__Host-sb_session=${token}; __Host-sb_session=${token}`);
      expectError(two, 401, 'unauthenticated');
      expect(two.json.error.message).to.equal(TWO_COOKIES_MESSAGE);
      // Over plain HTTP the prefixed name is not read, and the same Origin is another origin.
      expectError(await me(`__Host-sb_session=${token}`, SAME_ORIGIN), 401, 'unauthenticated');
      expectError(await me(`sb_session=${token}`, { Origin: `https://${host}` }), 403, 'csrf_refused');
      const stale = await me(`__Host-sb_session=ses_${'A'.repeat(43)}`);
      expectError(stale, 401, 'unauthenticated');
      expect(stale.headers.getSetCookie()).to.deep.equal([CLEARED_OVER_HTTPS]);
      const out = await callAt(proxied.url, 'DELETE', '/v1/auth/logout', undefined, undefined, {
        Cookie: `__Host-sb_session=${token}`,
        ...https,
      });
      expectNoContent(out);
      expect(out.headers.getSetCookie()).to.deep.equal([CLEARED_OVER_HTTPS]);
      expect(await count('select count(*)::int from sessions where token_hash = ?', [sha256(token)], proxied.db)).to.equal(0);
    } finally {
      await proxied.close();
    }
  });
});

describe('the first run', function () {
  this.timeout(120_000);

  interface LogLine {
    level: number;
    msg: string;
  }

  /**
   * The service on a database of its own that no test has written to, logging to `lines` (never to
   * the run's log: the line holds a live code by design). Closing leaves the database for the next start.
   */
  async function start(databaseUrl: string, dataDir: string, lines: LogLine[]): Promise<RunningServer> {
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as LogLine) });
    const env = { ...process.env, DATABASE_URL: databaseUrl, AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '0', ...CLOSES_AT_ONCE };
    return startServer({ ...loadConfig(env), port: 0, host: '127.0.0.1', dataDir }, logger);
  }

  const firstRunLines = (lines: LogLine[]) => lines.filter((line) => line.msg.startsWith('Create the first account'));

  it('logs a one-use code to create the first account with at each start while the database has no account, and none after', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-first-run-'));
    const fresh = database().kind === 'postgresql' ? await freshPostgresDatabase(process.env.DATABASE_URL!, 'sb_first_run') : undefined;
    let server: RunningServer | undefined;
    try {
      const lines: LogLine[] = [];
      server = await start(fresh?.url ?? '', dataDir, lines);
      const [line] = firstRunLines(lines);
      const pattern = new RegExp(`^Create the first account: ${server.url.replace(/\./g, '\\.')}/signup\\?invite=(inv_[a-z2-7]{26})$`);
      expect(line?.msg, 'the first-run line').to.match(pattern);
      expect(line!.level).to.equal(30);
      const first = secret(pattern.exec(line!.msg)![1]);
      const [code] = await sql<{ uses_left: number; expires_at: Date }>(
        'select uses_left, expires_at from invite_codes where code_hash = ?',
        [sha256(first)],
        server.db,
      );
      expect(code!.uses_left).to.equal(1);
      const days = (new Date(code!.expires_at).getTime() - Date.now()) / 86_400_000;
      expect(days).to.be.within(6.99, 7.01);
      await server.close();
      server = undefined;

      // Still no account: the next start logs a new code, and the first stays valid.
      const again: LogLine[] = [];
      server = await start(fresh?.url ?? '', dataDir, again);
      const [line2] = firstRunLines(again);
      expect(line2?.msg).to.match(/^Create the first account: http:\/\/127\.0\.0\.1:\d+\/signup\?invite=inv_[a-z2-7]{26}$/);
      const second = secret(line2!.msg.split('invite=')[1]);
      expect(second).to.not.equal(first);
      expect(await count('select count(*)::int from invite_codes where uses_left = 1', [], server.db)).to.equal(2);

      // The code logged first makes the first account.
      const password = secret(`pw-first-${process.pid}-${Date.now()}`);
      const signup = await callAt(server.url, 'POST', '/v1/auth/signup', undefined, {
        username: 'first',
        email: 'first@example.com',
        password,
        invite: first,
        cookie: true,
      });
      expectData(signup, 201);
      cookieSet(signup);
      await server.close();
      server = undefined;

      const later: LogLine[] = [];
      server = await start(fresh?.url ?? '', dataDir, later);
      expect(firstRunLines(later)).to.deep.equal([]);
      expect(await count('select count(*)::int from invite_codes', [], server.db)).to.equal(2);
    } finally {
      await server?.close();
      await fresh?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
