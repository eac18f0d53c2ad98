/**
 * Accounts and sessions: sign-up (the only cases that spend invite uses: two accounts), login, the
 * current user, and the session cookie of a login with `cookie: true`. Sign-up and login are
 * rate-limited per address (10 a minute by default): these cases send 17 of them, so against default
 * limits the run waits once, about a minute.
 */
import { INVITE_USES, Mismatch, randomToken, type CaseContext, type CaseDef } from '../case.js';
import type { Exchange } from '../http.js';
import { badPageSize, oneRequest, payloadTooLarge, sessionOf, unauthenticated, unsupportedMediaType } from './common.js';

const group = 'accounts';
const SIGNUP = 'POST /v1/auth/signup';
const LOGIN = 'POST /v1/auth/login';
const ME = 'GET /v1/users/me';
const RECEIVED = 'GET /v1/users/me/invites';

const SESSION_TOKEN = /^ses_[A-Za-z0-9_-]{43}$/;

/** Whether the deployment is reached over HTTPS, where the session cookie is `__Host-sb_session` and `Secure`. */
const overHttps = (t: CaseContext) => new URL(t.options.baseUrl).protocol === 'https:';

/** The session cookie's name: `__Host-sb_session` over HTTPS, `sb_session` over plain HTTP. */
const sessionCookieName = (t: CaseContext) => (overHttps(t) ? '__Host-sb_session' : 'sb_session');

function signupBody(t: CaseContext, who: 'a' | 'b') {
  const account = t.state[who];
  return { username: account.username, email: account.email, password: account.password, invite: t.options.inviteCode };
}

/** A refused invite code is the operator's business, not the deployment's: say what the run needs. */
function inviteHint(t: CaseContext, exchange: Exchange): void {
  if (exchange.status === 400 && exchange.json?.error?.code === 'invalid_invite') {
    throw new Mismatch(
      `the invite code was refused (400 invalid_invite): the run needs a code with ${INVITE_USES} uses left (npm run invite -- create ` +
        `--uses ${INVITE_USES})`,
      exchange,
    );
  }
}

function checkGrant(t: CaseContext, data: any, username: string, email: string): void {
  t.check(SESSION_TOKEN.test(data?.token ?? ''), 'the session token is ses_ and 43 URL-safe characters');
  t.check(
    data.user?.username === username.toLowerCase(),
    `the username comes back lower-case (${username.toLowerCase()}), got ${data.user?.username}`,
  );
  t.check(String(data.user?.email).toLowerCase() === email.toLowerCase(), 'the email address comes back');
  const days = (Date.parse(data.expires_at) - Date.now()) / 86_400_000;
  t.check(days > 29 && days <= 30.01, `the session expires in 30 days (expires_at ${data.expires_at})`);
}

export const accountCases: CaseDef[] = [
  unsupportedMediaType(
    group,
    SIGNUP,
    () => '/v1/auth/signup',
    () => undefined,
  ),
  oneRequest(
    group,
    SIGNUP,
    '400 invalid_request',
    'a body that breaks the formats (and has an undefined field) is refused, with details',
    (t) => ({
      method: 'POST',
      path: '/v1/auth/signup',
      json: { username: 'x!', email: 'not-an-address', password: 'short', invite: t.options.inviteCode, conformance: true },
    }),
  ),
  oneRequest(group, SIGNUP, '400 invalid_invite', 'an unknown invite code is refused', (t) => ({
    method: 'POST',
    path: '/v1/auth/signup',
    json: {
      username: `${t.state.tag}-z`,
      email: `${t.state.tag}-z@example.com`,
      password: t.state.a.password,
      invite: `inv_conformance_unknown_${t.state.tag}`,
    },
  })),
  oneRequest(
    group,
    SIGNUP,
    '401 unauthenticated',
    'sign-up with a credential that is not valid is refused (the caller should know its token is bad)',
    (t) => ({ method: 'POST', path: '/v1/auth/signup', token: randomToken(), json: signupBody(t, 'a') }),
  ),
  payloadTooLarge(
    group,
    SIGNUP,
    () => '/v1/auth/signup',
    () => undefined,
  ),
  {
    group,
    op: SIGNUP,
    expect: '201',
    title: 'user A signs up with the invite code; the username is stored lower-case',
    run: async (t) => {
      const { a } = t.state;
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/auth/signup',
        json: { ...signupBody(t, 'a'), username: a.username.toUpperCase() },
      });
      inviteHint(t, exchange);
      const data = t.expect(exchange, 201);
      checkGrant(t, data, a.username, a.email);
      a.id = data.user.id;
      a.session = data.token;
      t.ledger.sessions.set(data.token, `user A (${a.username.toLowerCase()}), from sign-up`);
      t.ledger.accounts.push(a.username);
    },
  },
  oneRequest(group, SIGNUP, '403 already_authenticated', 'sign-up with a valid session is refused', (t) => ({
    method: 'POST',
    path: '/v1/auth/signup',
    token: sessionOf('a')(t),
    json: { ...signupBody(t, 'b'), username: `${t.state.tag}-y`, email: `${t.state.tag}-y@example.com` },
  })),
  {
    group,
    op: SIGNUP,
    expect: '409 username_taken',
    title: 'a username in use, in other case, is refused (and takes no invite use)',
    run: async (t) => {
      t.need(t.state.a.id, 'user A');
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/auth/signup',
        json: { ...signupBody(t, 'a'), username: t.state.a.username.toUpperCase(), email: `${t.state.tag}-x@example.com` },
      });
      t.expect(exchange, 409, 'username_taken');
    },
  },
  {
    group,
    op: SIGNUP,
    expect: '409 email_taken',
    title: 'an email address in use, in other case, is refused (and takes no invite use)',
    run: async (t) => {
      t.need(t.state.a.id, 'user A');
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/auth/signup',
        json: { ...signupBody(t, 'a'), username: `${t.state.tag}-x`, email: t.state.a.email.toUpperCase() },
      });
      t.expect(exchange, 409, 'email_taken');
    },
  },
  {
    group,
    op: SIGNUP,
    expect: '201',
    title: 'user B signs up with the same code (its second use)',
    run: async (t) => {
      const { b } = t.state;
      const exchange = await t.send({ method: 'POST', path: '/v1/auth/signup', json: signupBody(t, 'b') });
      inviteHint(t, exchange);
      const data = t.expect(exchange, 201);
      checkGrant(t, data, b.username, b.email);
      b.id = data.user.id;
      b.session = data.token;
      t.ledger.sessions.set(data.token, `user B (${b.username}), from sign-up`);
      t.ledger.accounts.push(b.username);
    },
  },
  unsupportedMediaType(
    group,
    LOGIN,
    () => '/v1/auth/login',
    () => undefined,
  ),
  oneRequest(group, LOGIN, '400 invalid_request', 'a body without a password is refused, with details', (t) => ({
    method: 'POST',
    path: '/v1/auth/login',
    json: { login: t.state.a.username },
  })),
  payloadTooLarge(
    group,
    LOGIN,
    () => '/v1/auth/login',
    () => undefined,
  ),
  {
    group,
    op: LOGIN,
    expect: '401 invalid_credentials',
    title: 'a wrong password is refused, with a Bearer challenge',
    run: async (t) => {
      t.need(t.state.a.id, 'user A');
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/auth/login',
        json: { login: t.state.a.username, password: `${t.state.a.password}-wrong` },
      });
      t.expect(exchange, 401, 'invalid_credentials');
    },
  },
  oneRequest(group, LOGIN, '401 invalid_credentials', 'an unknown user gets the same answer as a wrong password', (t) => ({
    method: 'POST',
    path: '/v1/auth/login',
    json: { login: `${t.state.tag}-nobody`, password: t.state.a.password },
  })),
  {
    group,
    op: LOGIN,
    expect: '201',
    title: 'user A logs in by email address, in other case: a second session',
    run: async (t) => {
      const { a } = t.state;
      t.need(a.id, 'user A');
      const data = t.expect(
        await t.send({ method: 'POST', path: '/v1/auth/login', json: { login: a.email.toUpperCase(), password: a.password } }),
        201,
      );
      checkGrant(t, data, a.username, a.email);
      t.check(data.user.id === a.id, 'the same account');
      t.check(data.token !== a.session, 'a new session token');
      t.state.a2 = data.token;
      t.ledger.sessions.set(data.token, `user A (${a.username.toLowerCase()}), from login`);
    },
  },
  {
    group,
    op: LOGIN,
    expect: '201',
    title: 'a login with cookie: true sets the session as an HttpOnly, SameSite=Strict cookie and leaves the token out of the body',
    run: async (t) => {
      const { a } = t.state;
      t.need(a.id, 'user A');
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/auth/login',
        json: { login: a.username, password: a.password, cookie: true },
      });
      const data = t.expect(exchange, 201);
      t.check(data !== null && typeof data === 'object' && !('token' in data), 'no token in the body', exchange);
      t.check(data.user?.id === a.id, 'the same account', exchange);
      const cookies = exchange.headers.getSetCookie();
      const [name, secure] = [sessionCookieName(t), overHttps(t) ? '; Secure' : ''];
      const match = new RegExp(`^${name}=(ses_[A-Za-z0-9_-]{43}); HttpOnly; SameSite=Strict; Path=/; Max-Age=2592000${secure}$`).exec(
        cookies[0] ?? '',
      );
      t.check(
        cookies.length === 1 && match,
        `one Set-Cookie: ${name}=<session>; HttpOnly; SameSite=Strict; Path=/; Max-Age=2592000${secure} (got ${cookies.length})`,
        exchange,
      );
      t.state.aCookie = match![1]!;
      t.ledger.sessions.set(match![1]!, `user A (${a.username.toLowerCase()}), from a login with cookie: true`);
    },
  },
  {
    group,
    op: ME,
    expect: '200',
    title: "the session cookie authenticates a request from the service's own origin (Sec-Fetch-Site: same-origin)",
    run: async (t) => {
      const cookie = t.need(t.state.aCookie, 'the session cookie of user A');
      const headers = { Cookie: `${sessionCookieName(t)}=${cookie}`, 'Sec-Fetch-Site': 'same-origin' };
      const data = t.expect(await t.send({ method: 'GET', path: '/v1/users/me', headers }), 200);
      t.check(data.id === t.state.a.id, 'user A');
    },
  },
  oneRequest(group, ME, '403 csrf_refused', 'the session cookie from a page of another origin is refused', (t) => ({
    method: 'GET',
    path: '/v1/users/me',
    headers: {
      Cookie: `${sessionCookieName(t)}=${t.need(t.state.aCookie, 'the session cookie of user A')}`,
      Origin: 'https://conformance.invalid',
    },
  })),
  {
    group,
    op: ME,
    expect: '200',
    title: 'the current user, as its owner sees it (Token scheme, lower-case scheme word)',
    run: async (t) => {
      const { a } = t.state;
      const data = t.expect(await t.send({ method: 'GET', path: '/v1/users/me', authorization: `token ${sessionOf('a')(t)}` }), 200);
      t.check(
        data.id === a.id && data.username === a.username.toLowerCase() && data.email.toLowerCase() === a.email.toLowerCase(),
        'the signed-up account',
      );
      t.check(data.icon === null, 'no icon');
    },
  },
  oneRequest(group, ME, '400 invalid_request', 'a query parameter the operation does not define is refused', (t) => ({
    method: 'GET',
    path: '/v1/users/me?conformance=1',
    token: sessionOf('a')(t),
  })),
  oneRequest(group, ME, '401 unauthenticated', 'no credential at all is refused', () => ({ method: 'GET', path: '/v1/users/me' })),
  oneRequest(group, ME, '401 unauthenticated', 'a scheme other than Bearer or Token is refused', () => ({
    method: 'GET',
    path: '/v1/users/me',
    authorization: `Basic ${Buffer.from('a:b').toString('base64')}`,
  })),
  {
    group,
    op: RECEIVED,
    expect: '200',
    title: 'a new account has no invites',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: '/v1/users/me/invites', token: sessionOf('a')(t) }), 200);
      t.check(Array.isArray(data.items) && data.items.length === 0 && data.next_cursor === null, 'an empty last page');
    },
  },
  badPageSize(group, RECEIVED, () => '/v1/users/me/invites', sessionOf('a')),
  unauthenticated(group, RECEIVED, () => '/v1/users/me/invites'),
];
