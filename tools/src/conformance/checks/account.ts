/**
 * Account self-service: the caller's username and icon, its e-mail address and password, and its
 * sessions. Every change is put back before the case ends: user A renamed is renamed back, its icon
 * removed; user B's password changed is changed back. The e-mail address changes only when the link
 * mailed to the new address is followed, which a black-box run never sees: A's requests to change it
 * (to an address under the run's tag, and to B's) leave a pending change only, which goes with the
 * account at the end of the run. The sessions the cases open are ended (by the password change
 * back, or explicitly) and leave the ledger. Password and e-mail changes count against the
 * address's sign-up and login limit, as logins do.
 */
import { randomBytes } from 'node:crypto';
import { unknownUuid, type CaseContext, type CaseDef } from '../case.js';
import { png } from '../png.js';
import {
  badPageSize,
  expectDetails,
  oneRequest,
  payloadTooLarge,
  sessionOf,
  sessionRequired,
  unauthenticated,
  unsupportedMediaType,
} from './common.js';

const group = 'account';
const UPDATE_ME = 'PATCH /v1/users/me';
const PASSWORD = 'PUT /v1/users/me/password';
const EMAIL = 'PUT /v1/users/me/email';
const SESSIONS = 'GET /v1/auth/sessions';
const END_SESSION = 'DELETE /v1/auth/sessions/{id}';

const ICON_URL = /^https?:\/\/.+\/icons\/[0-9a-f]{64}\.png$/;

/** What `PUT /v1/users/me/email` answers every request it accepts, taken address or not (the contract's example). */
const EMAIL_CHANGE_MESSAGE = 'A link to confirm the change is on its way to the new address; the address changes when it is followed.';

/** A new session of `who` from login, recorded in the ledger until a case ends it. */
async function login(t: CaseContext, who: 'a' | 'b', password: string): Promise<string> {
  const account = t.state[who];
  const data = t.expect(await t.send({ method: 'POST', path: '/v1/auth/login', json: { login: account.username, password } }), 201);
  t.ledger.sessions.set(data.token, `user ${who.toUpperCase()} (${account.username.toLowerCase()}), from login`);
  return data.token as string;
}

/** The id of the session `token` is, as its own list shows it. */
async function sessionId(t: CaseContext, token: string): Promise<string> {
  const data = t.expect(await t.send({ method: 'GET', path: '/v1/auth/sessions?limit=100', token }), 200);
  const current = (data.items as { id: string; current: boolean }[]).filter((session) => session.current);
  t.check(current.length === 1, `exactly one session of the list is current (got ${current.length})`);
  return t.need(current[0]?.id, 'the current session in the list');
}

/** Addresses compare without regard to case. */
function sameAddress(got: unknown, expected: string): boolean {
  return typeof got === 'string' && got.toLowerCase() === expected.toLowerCase();
}

/** A's address is still the one it signed up with, as GET /v1/users/me shows it. */
async function sameEmail(t: CaseContext, token: string): Promise<void> {
  const me = t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token }), 200);
  t.check(sameAddress(me.email, t.state.a.email), `A's address is unchanged in GET /v1/users/me (got ${me.email})`);
}

/** The session must have ended: refused from now on. The ledger forgets it. */
async function ended(t: CaseContext, token: string): Promise<void> {
  t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token }), 401, 'unauthenticated');
  t.ledger.sessions.delete(token);
}

export const selfServiceCases: CaseDef[] = [
  unauthenticated(group, UPDATE_ME, () => '/v1/users/me', { json: {} }),
  unsupportedMediaType(group, UPDATE_ME, () => '/v1/users/me', sessionOf('a')),
  payloadTooLarge(group, UPDATE_ME, () => '/v1/users/me', sessionOf('a')),
  oneRequest(group, UPDATE_ME, '400 invalid_request', 'a field the operation does not define is refused, with details', (t) => ({
    method: 'PATCH',
    path: '/v1/users/me',
    token: sessionOf('a')(t),
    json: { conformance: true },
  })),
  oneRequest(group, UPDATE_ME, '400 invalid_request', 'an icon that is not a data: URL is refused, with details', (t) => ({
    method: 'PATCH',
    path: '/v1/users/me',
    token: sessionOf('a')(t),
    json: { icon: png(8, 8).toString('base64') },
  })),
  {
    group,
    op: UPDATE_ME,
    expect: '400 invalid_request',
    title: 'the email address is not changed here: a body with email is refused, with details, and the address stays',
    run: async (t) => {
      const token = sessionOf('a')(t);
      const exchange = await t.send({
        method: 'PATCH',
        path: '/v1/users/me',
        token,
        json: { email: `${t.state.tag}-a-patched@example.com` },
      });
      t.expect(exchange, 400, 'invalid_request');
      expectDetails(t, exchange.json);
      await sameEmail(t, token);
    },
  },
  {
    group,
    op: UPDATE_ME,
    expect: '409 username_taken',
    title: "another user's username, in other case, is refused, and A's stays",
    run: async (t) => {
      const token = sessionOf('a')(t);
      t.need(t.state.b.id, 'user B');
      t.expect(
        await t.send({ method: 'PATCH', path: '/v1/users/me', token, json: { username: t.state.b.username.toUpperCase() } }),
        409,
        'username_taken',
      );
      const me = t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token }), 200);
      t.check(me.username === t.state.a.username.toLowerCase(), `A's username is unchanged (got ${me.username})`);
    },
  },
  {
    group,
    op: UPDATE_ME,
    expect: '200',
    title: 'A changes its username and icon, sees them in GET /v1/users/me, and puts them back',
    run: async (t) => {
      const token = sessionOf('a')(t);
      const { a } = t.state;
      const unchanged = t.expect(await t.send({ method: 'PATCH', path: '/v1/users/me', token, json: {} }), 200);
      t.check(unchanged.username === a.username.toLowerCase(), 'an empty body changes nothing');
      const username = `${t.state.tag}-a-renamed`;
      const icon = `data:image/png;base64,${png(8, 8, { color: [30, 90, 200] }).toString('base64')}`;
      try {
        const changed = t.expect(await t.send({ method: 'PATCH', path: '/v1/users/me', token, json: { username, icon } }), 200);
        t.check(changed.username === username, `the new username (got ${changed.username})`);
        t.check(sameAddress(changed.email, a.email), `the address stays (got ${changed.email})`);
        t.check(typeof changed.icon === 'string' && ICON_URL.test(changed.icon), `an icon address (got ${changed.icon})`);
        const me = t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token }), 200);
        t.check(me.username === username && me.icon === changed.icon, 'GET /v1/users/me shows the change');
      } finally {
        const back = t.expect(
          await t.send({ method: 'PATCH', path: '/v1/users/me', token, json: { username: a.username, icon: null } }),
          200,
        );
        t.check(back.username === a.username.toLowerCase() && back.icon === null, 'A is put back as it was');
      }
    },
  },

  unauthenticated(group, PASSWORD, () => '/v1/users/me/password', { json: { current_password: 'x', new_password: 'conformance' } }),
  sessionRequired(group, PASSWORD, () => '/v1/users/me/password', {
    json: { current_password: 'conformance', new_password: 'conformance' },
  }),
  unsupportedMediaType(group, PASSWORD, () => '/v1/users/me/password', sessionOf('b')),
  payloadTooLarge(group, PASSWORD, () => '/v1/users/me/password', sessionOf('b')),
  oneRequest(group, PASSWORD, '400 invalid_request', 'a new password shorter than 8 characters is refused, with details', (t) => ({
    method: 'PUT',
    path: '/v1/users/me/password',
    token: sessionOf('b')(t),
    json: { current_password: t.state.b.password, new_password: 'short' },
  })),
  {
    group,
    op: PASSWORD,
    expect: '401 invalid_credentials',
    title: 'a wrong current password is refused, and the password stays',
    run: async (t) => {
      const exchange = await t.send({
        method: 'PUT',
        path: '/v1/users/me/password',
        token: sessionOf('b')(t),
        json: { current_password: `${t.state.b.password}-wrong`, new_password: `${t.state.b.password}-new` },
      });
      t.expect(exchange, 401, 'invalid_credentials');
      t.check(exchange.headers.get('www-authenticate') !== null, 'a 401 carries WWW-Authenticate', exchange);
    },
  },
  {
    group,
    op: PASSWORD,
    expect: '204',
    title: "B changes its password: B's other session ends, the calling one stays, the new password logs in; then B changes it back",
    run: async (t) => {
      const token = sessionOf('b')(t);
      const { b } = t.state;
      const other = await login(t, 'b', b.password);
      const next = `${b.password}-${randomBytes(6).toString('hex')}`;
      t.expect(
        await t.send({ method: 'PUT', path: '/v1/users/me/password', token, json: { current_password: b.password, new_password: next } }),
        204,
      );
      let changedBack = false;
      try {
        await ended(t, other);
        t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token }), 200);
        t.expect(
          await t.send({ method: 'POST', path: '/v1/auth/login', json: { login: b.username, password: b.password } }),
          401,
          'invalid_credentials',
        );
        const fresh = await login(t, 'b', next);
        t.expect(
          await t.send({ method: 'PUT', path: '/v1/users/me/password', token, json: { current_password: next, new_password: b.password } }),
          204,
        );
        changedBack = true;
        await ended(t, fresh);
      } finally {
        if (!changedBack) {
          await t.send({ method: 'PUT', path: '/v1/users/me/password', token, json: { current_password: next, new_password: b.password } });
        }
      }
    },
  },

  unauthenticated(group, EMAIL, () => '/v1/users/me/email', {
    json: { email: 'conformance@example.com', current_password: 'conformance' },
  }),
  sessionRequired(group, EMAIL, () => '/v1/users/me/email', {
    json: { email: 'conformance@example.com', current_password: 'conformance' },
  }),
  unsupportedMediaType(group, EMAIL, () => '/v1/users/me/email', sessionOf('a')),
  payloadTooLarge(group, EMAIL, () => '/v1/users/me/email', sessionOf('a')),
  {
    group,
    op: EMAIL,
    expect: '400 invalid_request',
    title: 'an email that is no address is refused, with details, even with the right password; the address stays',
    run: async (t) => {
      const token = sessionOf('a')(t);
      const exchange = await t.send({
        method: 'PUT',
        path: '/v1/users/me/email',
        token,
        json: { email: 'not an address', current_password: t.state.a.password },
      });
      t.expect(exchange, 400, 'invalid_request');
      expectDetails(t, exchange.json);
      await sameEmail(t, token);
    },
  },
  {
    group,
    op: EMAIL,
    expect: '401 invalid_credentials',
    title: 'a wrong current password is refused, with a Bearer challenge, and the address stays',
    run: async (t) => {
      const token = sessionOf('a')(t);
      const exchange = await t.send({
        method: 'PUT',
        path: '/v1/users/me/email',
        token,
        json: { email: `${t.state.tag}-a-new@example.com`, current_password: `${t.state.a.password}-wrong` },
      });
      t.expect(exchange, 401, 'invalid_credentials');
      t.check(exchange.headers.get('www-authenticate') !== null, 'a 401 carries WWW-Authenticate', exchange);
      await sameEmail(t, token);
    },
  },
  {
    group,
    op: EMAIL,
    expect: '202',
    title: 'A asks for a new address with its password: 202 and the message; nothing changes until the mailed link is followed',
    run: async (t) => {
      const token = sessionOf('a')(t);
      const exchange = await t.send({
        method: 'PUT',
        path: '/v1/users/me/email',
        token,
        json: { email: `${t.state.tag}-a-new@example.com`, current_password: t.state.a.password },
      });
      const data = t.expect(exchange, 202);
      t.check(data?.message === EMAIL_CHANGE_MESSAGE, `the message is "${EMAIL_CHANGE_MESSAGE}"`, exchange);
      await sameEmail(t, token);
    },
  },
  {
    group,
    op: EMAIL,
    expect: '202',
    title: "B's address, in other case, gets the same answer as a free one (it tells nobody who has an account); A's address stays",
    run: async (t) => {
      const token = sessionOf('a')(t);
      t.need(t.state.b.id, 'user B');
      const exchange = await t.send({
        method: 'PUT',
        path: '/v1/users/me/email',
        token,
        json: { email: t.state.b.email.toUpperCase(), current_password: t.state.a.password },
      });
      const data = t.expect(exchange, 202);
      t.check(data?.message === EMAIL_CHANGE_MESSAGE, 'the same message as for a free address', exchange);
      await sameEmail(t, token);
    },
  },

  unauthenticated(group, SESSIONS, () => '/v1/auth/sessions'),
  sessionRequired(group, SESSIONS, () => '/v1/auth/sessions'),
  badPageSize(group, SESSIONS, () => '/v1/auth/sessions', sessionOf('a')),
  {
    group,
    op: SESSIONS,
    expect: '200',
    title: "A's sessions are listed with their device, the calling one marked current; never a token",
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: '/v1/auth/sessions', token: sessionOf('a')(t) }), 200);
      const items = data.items as Record<string, unknown>[];
      t.check(items.length >= 1, 'at least the calling session');
      t.check(items.filter((session) => session.current === true).length === 1, 'exactly one is current');
      t.check(!JSON.stringify(data).includes('ses_'), 'no token is shown');
    },
  },

  unauthenticated(group, END_SESSION, () => `/v1/auth/sessions/${unknownUuid()}`),
  sessionRequired(group, END_SESSION, () => `/v1/auth/sessions/${unknownUuid()}`),
  oneRequest(group, END_SESSION, '400 invalid_request', 'a malformed session id is refused, with details', (t) => ({
    method: 'DELETE',
    path: '/v1/auth/sessions/not-a-uuid',
    token: sessionOf('a')(t),
  })),
  oneRequest(group, END_SESSION, '404 not_found', 'an unknown session id is not found', (t) => ({
    method: 'DELETE',
    path: `/v1/auth/sessions/${unknownUuid()}`,
    token: sessionOf('a')(t),
  })),
  {
    group,
    op: END_SESSION,
    expect: '404 not_found',
    title: "B's session id is not found for A, and B's session goes on",
    run: async (t) => {
      const id = await sessionId(t, sessionOf('b')(t));
      t.expect(await t.send({ method: 'DELETE', path: `/v1/auth/sessions/${id}`, token: sessionOf('a')(t) }), 404, 'not_found');
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: sessionOf('b')(t) }), 200);
    },
  },
  {
    group,
    op: END_SESSION,
    expect: '204',
    title: 'A ends another session of its own: it is refused from then on',
    run: async (t) => {
      const other = await login(t, 'a', t.state.a.password);
      const id = await sessionId(t, other);
      t.expect(await t.send({ method: 'DELETE', path: `/v1/auth/sessions/${id}`, token: sessionOf('a')(t) }), 204);
      await ended(t, other);
    },
  },
];
