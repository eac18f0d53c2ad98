/**
 * Invites and members. User A (owner of P1) invites user B; B, a pending invitee, reaches only its
 * own invite; A revokes and invites again; B accepts and is a member; at the end B leaves.
 */
import type { CaseContext, CaseDef } from '../case.js';
import { badPageSize, expectDetails, ns, oneRequest, payloadTooLarge, sessionOf, unauthenticated, unsupportedMediaType } from './common.js';

const INVITES = 'invites';
const MEMBERS = 'members';
const CREATE = 'POST /v1/projects/{namespace}/invites';
const LIST = 'GET /v1/projects/{namespace}/invites';
const ACCEPT = 'PUT /v1/projects/{namespace}/invites/{username}';
const DELETE = 'DELETE /v1/projects/{namespace}/invites/{username}';
const REMOVE = 'DELETE /v1/projects/{namespace}/members/{username}';
const RECEIVED = 'GET /v1/users/me/invites';

const invites = (t: CaseContext) => `/v1/projects/${ns(t)}/invites`;
const user = (t: CaseContext, who: 'a' | 'b') => t.state[who].username.toLowerCase();

async function invite(t: CaseContext, username: string) {
  return t.send({ method: 'POST', path: invites(t), token: sessionOf('a')(t), json: { username } });
}

export const inviteCases: CaseDef[] = [
  {
    group: INVITES,
    op: CREATE,
    expect: '404 not_found',
    title: 'inviting a username no account has is 404',
    run: async (t) => {
      t.expect(await invite(t, `${t.state.tag}-nobody`), 404, 'not_found');
    },
  },
  oneRequest(INVITES, CREATE, '404 not_found', 'a non-member inviting is 404', (t) => ({
    method: 'POST',
    path: invites(t),
    token: sessionOf('b')(t),
    json: { username: user(t, 'b') },
  })),
  {
    group: INVITES,
    op: CREATE,
    expect: '400 invalid_request',
    title: 'a username outside the format is refused, with details',
    run: async (t) => {
      const exchange = await invite(t, 'x');
      t.expect(exchange, 400, 'invalid_request');
      expectDetails(t, exchange.json);
    },
  },
  unsupportedMediaType(INVITES, CREATE, invites, sessionOf('a')),
  payloadTooLarge(INVITES, CREATE, invites, sessionOf('a')),
  unauthenticated(INVITES, CREATE, invites, { json: { username: 'conformance' } }),
  {
    group: INVITES,
    op: CREATE,
    expect: '201',
    title: 'the owner invites user B (username in other case)',
    run: async (t) => {
      const data = t.expect(await invite(t, t.state.b.username.toUpperCase()), 201);
      t.check(data.user?.id === t.state.b.id && data.user.username === user(t, 'b'), 'the invited user is B');
      t.check(data.invited_by?.id === t.state.a.id, 'invited by A');
    },
  },
  {
    group: INVITES,
    op: CREATE,
    expect: '409 already_invited',
    title: 'inviting a user with a pending invite is refused',
    run: async (t) => {
      t.expect(await invite(t, user(t, 'b')), 409, 'already_invited');
    },
  },
  {
    group: INVITES,
    op: LIST,
    expect: '200',
    title: "a member lists the project's pending invites",
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: invites(t), token: sessionOf('a')(t) }), 200);
      t.check(data.items.length === 1 && data.items[0].user.id === t.state.b.id, "B's invite is listed");
    },
  },
  oneRequest(INVITES, LIST, '404 not_found', "a pending invitee is no member: the project's invite list is 404 to it", (t) => ({
    method: 'GET',
    path: invites(t),
    token: sessionOf('b')(t),
  })),
  badPageSize(INVITES, LIST, invites, sessionOf('a')),
  unauthenticated(INVITES, LIST, invites),
  {
    group: INVITES,
    op: RECEIVED,
    expect: '200',
    title: 'the invitee finds its invite',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: '/v1/users/me/invites', token: sessionOf('b')(t) }), 200);
      t.check(
        data.items.length === 1 && data.items[0].project.namespace === ns(t) && data.items[0].invited_by?.id === t.state.a.id,
        'the invite to P1, from A',
      );
    },
  },
  {
    group: INVITES,
    op: DELETE,
    expect: '204',
    title: 'the owner revokes the invite; the invitee no longer sees it (then A invites B again)',
    run: async (t) => {
      t.expect(await t.send({ method: 'DELETE', path: `${invites(t)}/${user(t, 'b')}`, token: sessionOf('a')(t) }), 204);
      const data = t.expect(await t.send({ method: 'GET', path: '/v1/users/me/invites', token: sessionOf('b')(t) }), 200);
      t.check(data.items.length === 0, 'the invite is gone');
      t.expect(await invite(t, user(t, 'b')), 201);
    },
  },
  oneRequest(INVITES, DELETE, '404 not_found', 'declining an invite one does not have is 404', (t) => ({
    method: 'DELETE',
    path: `${invites(t)}/${user(t, 'a')}`,
    token: sessionOf('a')(t),
  })),
  oneRequest(INVITES, DELETE, '400 invalid_request', 'a username outside the format is refused', (t) => ({
    method: 'DELETE',
    path: `${invites(t)}/x`,
    token: sessionOf('a')(t),
  })),
  unauthenticated(INVITES, DELETE, (t) => `${invites(t)}/${user(t, 'b')}`),
  oneRequest(INVITES, ACCEPT, '403 forbidden', "a member (here the owner) cannot accept someone else's invite", (t) => ({
    method: 'PUT',
    path: `${invites(t)}/${user(t, 'b')}`,
    token: sessionOf('a')(t),
  })),
  oneRequest(INVITES, ACCEPT, '404 not_found', 'accepting an invite one does not have is 404', (t) => ({
    method: 'PUT',
    path: `${invites(t)}/${user(t, 'a')}`,
    token: sessionOf('a')(t),
  })),
  oneRequest(INVITES, ACCEPT, '404 not_found', "a non-member naming someone else's invite gets 404", (t) => ({
    method: 'PUT',
    path: `/v1/projects/${ns(t, 'p2')}/invites/${user(t, 'a')}`,
    token: sessionOf('b')(t),
  })),
  oneRequest(INVITES, ACCEPT, '400 invalid_request', 'a username outside the format is refused', (t) => ({
    method: 'PUT',
    path: `${invites(t)}/x`,
    token: sessionOf('b')(t),
  })),
  unauthenticated(INVITES, ACCEPT, (t) => `${invites(t)}/${user(t, 'b')}`),
  {
    group: INVITES,
    op: ACCEPT,
    expect: '200',
    title: 'the invitee accepts: it is a member, the invite is gone, the answer is the project',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'PUT', path: `${invites(t)}/${user(t, 'b')}`, token: sessionOf('b')(t) }), 200);
      t.check(data.namespace === ns(t), 'the project comes back');
      t.check(
        data.members.some((m: { id: string; role: string }) => m.id === t.state.b.id && m.role === 'member'),
        'B is a member',
      );
      const list = t.expect(await t.send({ method: 'GET', path: invites(t), token: sessionOf('b')(t) }), 200);
      t.check(list.items.length === 0, 'no invite is pending');
    },
  },
  {
    group: INVITES,
    op: CREATE,
    expect: '409 already_member',
    title: 'inviting a member is refused',
    run: async (t) => {
      t.expect(await invite(t, user(t, 'b')), 409, 'already_member');
    },
  },
];

/** With B a member of P1. */
export const memberCases: CaseDef[] = [
  oneRequest(INVITES, CREATE, '403 not_owner', 'a member who is not the owner may not invite', (t) => ({
    method: 'POST',
    path: invites(t),
    token: sessionOf('b')(t),
    json: { username: `${t.state.tag}-nobody` },
  })),
  oneRequest(INVITES, DELETE, '403 not_owner', "a member who is not the owner may not revoke another user's invite", (t) => ({
    method: 'DELETE',
    path: `${invites(t)}/${user(t, 'a')}`,
    token: sessionOf('b')(t),
  })),
  oneRequest(MEMBERS, REMOVE, '403 not_owner', 'a member who is not the owner may not remove another member', (t) => ({
    method: 'DELETE',
    path: `/v1/projects/${ns(t)}/members/${user(t, 'a')}`,
    token: sessionOf('b')(t),
  })),
  oneRequest(MEMBERS, REMOVE, '409 owner_cannot_leave', 'the owner can neither leave nor be removed', (t) => ({
    method: 'DELETE',
    path: `/v1/projects/${ns(t)}/members/${user(t, 'a')}`,
    token: sessionOf('a')(t),
  })),
  oneRequest(MEMBERS, REMOVE, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'DELETE',
    path: `/v1/projects/${ns(t, 'p2')}/members/${user(t, 'b')}`,
    token: sessionOf('b')(t),
  })),
  oneRequest(MEMBERS, REMOVE, '400 invalid_request', 'a username outside the format is refused', (t) => ({
    method: 'DELETE',
    path: `/v1/projects/${ns(t)}/members/x`,
    token: sessionOf('a')(t),
  })),
  unauthenticated(MEMBERS, REMOVE, (t) => `/v1/projects/${ns(t)}/members/${user(t, 'b')}`),
];

export const leaveCases: CaseDef[] = [
  {
    group: MEMBERS,
    op: REMOVE,
    expect: '204',
    title: 'a member leaves; the project is then 404 to it',
    run: async (t) => {
      t.expect(await t.send({ method: 'DELETE', path: `/v1/projects/${ns(t)}/members/${user(t, 'b')}`, token: sessionOf('b')(t) }), 204);
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: sessionOf('b')(t) }), 404, 'not_found');
      const data = t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: sessionOf('a')(t) }), 200);
      t.check(data.members.length === 1, 'the owner is the only member again');
    },
  },
];
