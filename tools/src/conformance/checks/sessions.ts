/** Logout, and the run's own credentials given back: the API token revoked, every session ended. */
import { randomToken, type CaseDef } from '../case.js';
import { oneRequest, sessionRequired } from './common.js';

const group = 'sessions';
const LOGOUT = 'DELETE /v1/auth/logout';

export const sessionCases: CaseDef[] = [
  sessionRequired(group, LOGOUT, () => '/v1/auth/logout'),
  oneRequest(group, LOGOUT, '401 unauthenticated', 'a token no one was given is refused, with a Bearer challenge', () => ({
    method: 'DELETE',
    path: '/v1/auth/logout',
    token: randomToken(),
  })),
  {
    group,
    op: LOGOUT,
    expect: '400 invalid_request',
    title: 'a query parameter the operation does not define is refused (and the session stays)',
    run: async (t) => {
      const second = t.need(t.state.a2, "user A's second session");
      t.expect(await t.send({ method: 'DELETE', path: '/v1/auth/logout?conformance=1', token: second }), 400, 'invalid_request');
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: second }), 200);
    },
  },
  {
    group,
    op: 'DELETE /v1/auth/tokens/{id}',
    expect: '204',
    title: "the run's API token is revoked; it is refused from then on",
    run: async (t) => {
      const made = t.need(t.state.apiToken, 'an API token');
      t.expect(
        await t.send({ method: 'DELETE', path: `/v1/auth/tokens/${made.id}`, token: t.need(t.state.a.session, 'a session of user A') }),
        204,
      );
      t.ledger.tokens.delete(made.id);
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: made.token }), 401, 'unauthenticated');
    },
  },
  {
    group,
    op: LOGOUT,
    expect: '204',
    title: 'logout ends the calling session only: it is refused after, the other session of the user still works',
    run: async (t) => {
      const second = t.need(t.state.a2, "user A's second session");
      t.expect(await t.send({ method: 'DELETE', path: '/v1/auth/logout', token: second }), 204);
      t.ledger.sessions.delete(second);
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: second }), 401, 'unauthenticated');
      t.expect(await t.send({ method: 'DELETE', path: '/v1/auth/logout', token: second }), 401, 'unauthenticated');
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: t.need(t.state.a.session, 'a session of user A') }), 200);
    },
  },
  {
    group,
    op: LOGOUT,
    expect: '204',
    title: 'users A and B log out',
    run: async (t) => {
      const kept: string[] = [];
      for (const who of ['a', 'b'] as const) {
        const session = t.need(t.state[who].session, `a session of user ${who.toUpperCase()}`);
        // A session the clean-up still needs (a project or token an earlier case failed to remove) stays.
        if ([...t.ledger.projects.values(), ...t.ledger.tokens.values()].includes(session)) {
          kept.push(who.toUpperCase());
          continue;
        }
        t.expect(await t.send({ method: 'DELETE', path: '/v1/auth/logout', token: session }), 204);
        t.ledger.sessions.delete(session);
      }
      t.check(
        kept.length === 0,
        `not logged out: ${kept.join(', ')}, whose session the clean-up needs (an earlier case left a project or token)`,
      );
    },
  },
];
