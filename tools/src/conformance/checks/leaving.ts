/**
 * Leaving and handing over, last of the run (before the rate-limit sweep, which spends this
 * address's login limit): users A and B sign in again, A makes project H and B joins it, A hands H
 * over to B, then both delete their accounts, A first (it leaves H), then B (H, now B's alone, goes
 * with it). So the run leaves no account behind; whatever an earlier case left in the ledger that
 * belongs to them goes with the accounts too.
 */
import type { CaseContext, CaseDef } from '../case.js';
import { oneRequest, payloadTooLarge, sessionOf, sessionRequired, unauthenticated, unsupportedMediaType } from './common.js';

const group = 'leaving';
const TRANSFER = 'PUT /v1/projects/{namespace}/owner';
const DELETE_ME = 'DELETE /v1/users/me';

const handed = (t: CaseContext): string => t.need(t.state.handedOver, 'project H');
const ownerPath = (t: CaseContext): string => `/v1/projects/${handed(t)}/owner`;

/** Everything the ledger holds for the session `session`'s account is gone with the account. */
function forget(t: CaseContext, who: 'a' | 'b', session: string): void {
  const account = t.state[who];
  for (const [namespace, owner] of t.ledger.projects) if (owner === session) t.ledger.projects.delete(namespace);
  for (const [id, maker] of t.ledger.tokens) if (maker === session) t.ledger.tokens.delete(id);
  for (const [token, whose] of t.ledger.sessions)
    if (whose.includes(`(${account.username.toLowerCase()})`)) t.ledger.sessions.delete(token);
  t.ledger.sessions.delete(session);
  const index = t.ledger.accounts.indexOf(account.username);
  if (index >= 0) t.ledger.accounts.splice(index, 1);
}

export const leavingCases: CaseDef[] = [
  {
    group,
    op: 'POST /v1/auth/login',
    expect: '201',
    title: 'users A and B sign in again, and A makes an API token, for the cases that end the run',
    run: async (t) => {
      for (const who of ['a', 'b'] as const) {
        const account = t.state[who];
        const data = t.expect(
          await t.send({ method: 'POST', path: '/v1/auth/login', json: { login: account.username, password: account.password } }),
          201,
        );
        account.session = data.token;
        t.ledger.sessions.set(data.token, `user ${who.toUpperCase()} (${account.username.toLowerCase()}), from login`);
      }
      const made = t.expect(
        await t.send({ method: 'POST', path: '/v1/auth/tokens', token: sessionOf('a')(t), json: { name: `${t.state.tag} leaving` } }),
        201,
      );
      t.state.apiToken = { id: made.id, token: made.token };
      t.ledger.tokens.set(made.id, sessionOf('a')(t));
    },
  },
  {
    group,
    op: 'PUT /v1/projects/{namespace}/invites/{username}',
    expect: '200',
    title: 'A creates project H and invites B, who joins it',
    run: async (t) => {
      const namespace = `${t.state.tag}-h`;
      const a = sessionOf('a')(t);
      const b = sessionOf('b')(t);
      t.expect(await t.send({ method: 'POST', path: '/v1/projects', token: a, json: { name: 'Conformance H', namespace } }), 201);
      t.ledger.projects.set(namespace, a);
      t.state.handedOver = namespace;
      const invitee = t.state.b.username.toLowerCase();
      t.expect(await t.send({ method: 'POST', path: `/v1/projects/${namespace}/invites`, token: a, json: { username: invitee } }), 201);
      t.expect(await t.send({ method: 'PUT', path: `/v1/projects/${namespace}/invites/${invitee}`, token: b }), 200);
    },
  },
  unauthenticated(group, TRANSFER, ownerPath, { json: { username: 'conformance' } }),
  sessionRequired(group, TRANSFER, ownerPath, { json: { username: 'conformance' } }),
  unsupportedMediaType(group, TRANSFER, ownerPath, sessionOf('a')),
  payloadTooLarge(group, TRANSFER, ownerPath, sessionOf('a')),
  oneRequest(group, TRANSFER, '400 invalid_request', 'a body without username is refused, with details', (t) => ({
    method: 'PUT',
    path: ownerPath(t),
    token: sessionOf('a')(t),
    json: {},
  })),
  oneRequest(group, TRANSFER, '403 not_owner', 'B, a member, cannot hand over a project it does not own', (t) => ({
    method: 'PUT',
    path: ownerPath(t),
    token: sessionOf('b')(t),
    json: { username: t.state.b.username.toLowerCase() },
  })),
  oneRequest(group, TRANSFER, '404 not_found', 'a username that is no member of the project is refused', (t) => ({
    method: 'PUT',
    path: ownerPath(t),
    token: sessionOf('a')(t),
    json: { username: `${t.state.tag}-nobody` },
  })),
  {
    group,
    op: TRANSFER,
    expect: '200',
    title: 'A hands H over to B: B the owner, A a member, and project.owner_changed in the activity',
    run: async (t) => {
      const a = t.state.a;
      const b = t.state.b;
      const data = t.expect(
        await t.send({ method: 'PUT', path: ownerPath(t), token: sessionOf('a')(t), json: { username: b.username.toLowerCase() } }),
        200,
      );
      t.ledger.projects.set(handed(t), sessionOf('b')(t));
      const roles = (data.members as { id: string; role: string }[]).map((m) => `${m.id}:${m.role}`);
      t.check(
        roles.length === 2 && roles[0] === `${b.id}:owner` && roles[1] === `${a.id}:member`,
        `B first, as owner, then A as member (got ${JSON.stringify(data.members)})`,
      );
      const log = t.expect(
        await t.send({ method: 'GET', path: `/v1/projects/${handed(t)}/activity?limit=1`, token: sessionOf('b')(t) }),
        200,
      );
      const entry = log.items[0];
      t.check(
        entry?.type === 'project.owner_changed' &&
          entry.data?.from === a.username.toLowerCase() &&
          entry.data?.to === b.username.toLowerCase(),
        `the newest activity is project.owner_changed from A to B (got ${JSON.stringify(entry)})`,
      );
    },
  },
  unauthenticated(group, DELETE_ME, () => '/v1/users/me', { json: { password: 'conformance' } }),
  sessionRequired(group, DELETE_ME, () => '/v1/users/me', { json: { password: 'conformance' } }),
  unsupportedMediaType(group, DELETE_ME, () => '/v1/users/me', sessionOf('a')),
  payloadTooLarge(group, DELETE_ME, () => '/v1/users/me', sessionOf('a')),
  oneRequest(group, DELETE_ME, '400 invalid_request', 'a body without password is refused, with details', (t) => ({
    method: 'DELETE',
    path: '/v1/users/me',
    token: sessionOf('a')(t),
    json: {},
  })),
  {
    group,
    op: DELETE_ME,
    expect: '401 invalid_credentials',
    title: 'a wrong password is refused, and the account stays',
    run: async (t) => {
      const session = sessionOf('a')(t);
      const wrong = { password: `${t.state.a.password}-wrong` };
      t.expect(await t.send({ method: 'DELETE', path: '/v1/users/me', token: session, json: wrong }), 401, 'invalid_credentials');
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: session }), 200);
    },
  },
  {
    group,
    op: DELETE_ME,
    expect: '409 owns_projects',
    title: 'B, owner of H which A is a member of, cannot delete its account; the answer names H',
    run: async (t) => {
      const exchange = await t.send({
        method: 'DELETE',
        path: '/v1/users/me',
        token: sessionOf('b')(t),
        json: { password: t.state.b.password },
      });
      const details = exchange.json?.error?.details as { path: string }[] | undefined;
      t.expect(exchange, 409, 'owns_projects');
      t.check(
        details?.some((d) => d.path === `/projects/${handed(t)}`),
        'the details name H',
        exchange,
      );
    },
  },
  {
    group,
    op: DELETE_ME,
    expect: '204',
    title: 'A deletes its account: it leaves H, its credentials are refused from then on',
    run: async (t) => {
      const session = sessionOf('a')(t);
      const token = t.need(t.state.apiToken, 'an API token').token;
      t.expect(await t.send({ method: 'DELETE', path: '/v1/users/me', token: session, json: { password: t.state.a.password } }), 204);
      forget(t, 'a', session);
      t.state.apiToken = undefined;
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: session }), 401, 'unauthenticated');
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token }), 401, 'unauthenticated');
      const project = t.expect(await t.send({ method: 'GET', path: `/v1/projects/${handed(t)}`, token: sessionOf('b')(t) }), 200);
      t.check(project.members.length === 1, `B alone is left in H (got ${JSON.stringify(project.members)})`);
    },
  },
  {
    group,
    op: DELETE_ME,
    expect: '204',
    title: 'B deletes its account, and H, now its alone, goes with it',
    run: async (t) => {
      const session = sessionOf('b')(t);
      t.expect(await t.send({ method: 'DELETE', path: '/v1/users/me', token: session, json: { password: t.state.b.password } }), 204);
      forget(t, 'b', session);
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: session }), 401, 'unauthenticated');
    },
  },
];
