/**
 * Projects: create (with and without an icon), list, read, change (name, namespace, icon), delete.
 * User A owns P1 and P2; user B is, at this point, no member of either: every project route answers
 * it 404, so a namespace in use is never revealed.
 */
import type { CaseContext, CaseDef } from '../case.js';
import { notPng, png } from '../png.js';
import { ns, oneRequest, payloadTooLarge, sessionOf, sessionRequired, unauthenticated, unsupportedMediaType } from './common.js';

const group = 'projects';
const CREATE = 'POST /v1/projects';
const LIST = 'GET /v1/projects';
const GET = 'GET /v1/projects/{namespace}';
const UPDATE = 'PATCH /v1/projects/{namespace}';
const DELETE = 'DELETE /v1/projects/{namespace}';

const ICON_URL = /^https?:\/\/.+\/icons\/[0-9a-f]{64}\.png$/;

const apiToken = (t: CaseContext) => t.need(t.state.apiToken, 'an API token').token;

export const projectCases: CaseDef[] = [
  {
    group,
    op: CREATE,
    expect: '201',
    title: 'user A creates P1 with a bare Base64 PNG icon: one feed "general", A the owner, tier 0',
    run: async (t) => {
      const namespace = `${t.state.tag}-p1`;
      const data = t.expect(
        await t.send({
          method: 'POST',
          path: '/v1/projects',
          token: sessionOf('a')(t),
          json: { name: 'Conformance P1', namespace, icon: png(16, 16).toString('base64') },
        }),
        201,
      );
      t.ledger.projects.set(namespace, sessionOf('a')(t));
      t.state.p1 = namespace;
      t.check(data.namespace === namespace && data.name === 'Conformance P1', 'name and namespace come back');
      t.check(data.tier === 0 && data.billing_id === null, 'tier 0, no billing id');
      t.check(
        typeof data.icon === 'string' && ICON_URL.test(data.icon),
        `the icon is shown as {CDN_URL}/icons/<sha256>.png (got ${data.icon})`,
      );
      t.check(
        data.feeds.length === 1 &&
          data.feeds[0].name === 'general' &&
          data.feeds[0].type === 0 &&
          data.feeds[0].emoji === null &&
          data.feeds[0].description === null,
        `one feed, "general", type 0, no emoji, no description (got ${JSON.stringify(data.feeds)})`,
      );
      t.check(
        data.members.length === 1 && data.members[0].id === t.state.a.id && data.members[0].role === 'owner',
        `its creator is the only member, as owner (got ${JSON.stringify(data.members)})`,
      );
    },
  },
  {
    group,
    op: CREATE,
    expect: '201',
    title: 'user A creates P2 with its API token (API tokens act on every route but the session-only ones)',
    run: async (t) => {
      const namespace = `${t.state.tag}-p2`;
      const data = t.expect(
        await t.send({ method: 'POST', path: '/v1/projects', token: apiToken(t), json: { name: '  Conformance P2  ', namespace } }),
        201,
      );
      t.ledger.projects.set(namespace, sessionOf('a')(t));
      t.state.p2 = namespace;
      t.check(data.icon === null, 'no icon');
      t.check(data.members[0]?.id === t.state.a.id, "the token's user owns it");
    },
  },
  oneRequest(group, CREATE, '409 namespace_taken', 'a namespace in use is refused', (t) => ({
    method: 'POST',
    path: '/v1/projects',
    token: sessionOf('a')(t),
    json: { name: 'Again', namespace: ns(t) },
  })),
  oneRequest(group, CREATE, '400 invalid_request', 'a namespace outside [a-z0-9-] is refused, with details', (t) => ({
    method: 'POST',
    path: '/v1/projects',
    token: sessionOf('a')(t),
    json: { name: 'Bad', namespace: 'Not_Valid' },
  })),
  {
    group,
    op: CREATE,
    expect: '400 invalid_request',
    title: 'an icon that is not a PNG is refused, and nothing is created',
    run: async (t) => {
      const namespace = `${t.state.tag}-bad`;
      const exchange = await t.send({
        method: 'POST',
        path: '/v1/projects',
        token: sessionOf('a')(t),
        json: { name: 'Bad icon', namespace, icon: notPng.toString('base64') },
      });
      if (exchange.status === 201) t.ledger.projects.set(namespace, sessionOf('a')(t));
      t.expect(exchange, 400, 'invalid_request');
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${namespace}`, token: sessionOf('a')(t) }), 404, 'not_found');
    },
  },
  unsupportedMediaType(group, CREATE, () => '/v1/projects', sessionOf('a')),
  payloadTooLarge(group, CREATE, () => '/v1/projects', sessionOf('a')),
  unauthenticated(group, CREATE, () => '/v1/projects', { json: { name: 'x', namespace: 'conformance-x' } }),
  {
    group,
    op: LIST,
    expect: '200',
    title: "the caller's projects, newest first, one page at a time by cursor",
    run: async (t) => {
      const [p1, p2] = [ns(t), ns(t, 'p2')];
      const first = t.expect(await t.send({ method: 'GET', path: '/v1/projects?limit=1', token: sessionOf('a')(t) }), 200);
      t.check(
        first.items.length === 1 && first.items[0].namespace === p2,
        `page 1 holds the newest, P2 (got ${first.items.map((p: { namespace: string }) => p.namespace)})`,
      );
      t.check(typeof first.next_cursor === 'string', 'page 1 has a next_cursor');
      const second = t.expect(
        await t.send({
          method: 'GET',
          path: `/v1/projects?limit=1&cursor=${encodeURIComponent(first.next_cursor)}`,
          token: sessionOf('a')(t),
        }),
        200,
      );
      t.check(
        second.items.length === 1 && second.items[0].namespace === p1,
        `page 2 holds P1 (got ${second.items.map((p: { namespace: string }) => p.namespace)})`,
      );
      const rest = t.expect(await t.send({ method: 'GET', path: '/v1/projects', token: sessionOf('b')(t) }), 200);
      t.check(rest.items.length === 0 && rest.next_cursor === null, 'user B, a member of nothing, gets an empty last page');
    },
  },
  oneRequest(group, LIST, '400 invalid_request', 'a cursor the service did not issue is refused', (t) => ({
    method: 'GET',
    path: '/v1/projects?cursor=not-a-cursor',
    token: sessionOf('a')(t),
  })),
  unauthenticated(group, LIST, () => '/v1/projects'),
  {
    group,
    op: GET,
    expect: '200',
    title: 'a member (the owner) reads the project',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: sessionOf('a')(t) }), 200);
      t.check(data.namespace === ns(t) && data.members[0]?.role === 'owner', 'the project, owner first');
    },
  },
  oneRequest(group, GET, '400 invalid_request', 'a namespace outside the format is refused', (t) => ({
    method: 'GET',
    path: '/v1/projects/NOT_VALID',
    token: sessionOf('a')(t),
  })),
  oneRequest(group, GET, '404 not_found', 'a non-member gets 404 for a project that exists', (t) => ({
    method: 'GET',
    path: `/v1/projects/${ns(t)}`,
    token: sessionOf('b')(t),
  })),
  oneRequest(group, GET, '404 not_found', 'a namespace no project has is 404', (t) => ({
    method: 'GET',
    path: `/v1/projects/${t.state.tag}-none`,
    token: sessionOf('a')(t),
  })),
  unauthenticated(group, GET, (t) => `/v1/projects/${ns(t)}`),
  {
    group,
    op: UPDATE,
    expect: '200',
    title: 'the owner renames P2 (name and namespace); the old namespace then answers 404',
    run: async (t) => {
      const from = ns(t, 'p2');
      const to = `${t.state.tag}-p2b`;
      const exchange = await t.send({
        method: 'PATCH',
        path: `/v1/projects/${from}`,
        token: apiToken(t),
        json: { name: 'Conformance P2b', namespace: to },
      });
      if (exchange.status === 200) {
        t.ledger.renamed(from, to);
        t.state.p2 = to;
      }
      const data = t.expect(exchange, 200);
      t.check(data.namespace === to && data.name === 'Conformance P2b', 'the new name and namespace');
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${from}`, token: sessionOf('a')(t) }), 404, 'not_found');
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${to}`, token: sessionOf('a')(t) }), 200);
    },
  },
  {
    group,
    op: UPDATE,
    expect: '200',
    title: 'the owner sets an icon (data URL) and removes it (null)',
    run: async (t) => {
      const path = `/v1/projects/${ns(t, 'p2')}`;
      const set = t.expect(
        await t.send({
          method: 'PATCH',
          path,
          token: sessionOf('a')(t),
          json: { icon: `data:image/png;base64,${png(8, 8).toString('base64')}` },
        }),
        200,
      );
      t.check(typeof set.icon === 'string' && ICON_URL.test(set.icon), `an icon address (got ${set.icon})`);
      const removed = t.expect(await t.send({ method: 'PATCH', path, token: sessionOf('a')(t), json: { icon: null } }), 200);
      t.check(removed.icon === null, 'the icon is gone');
    },
  },
  oneRequest(group, UPDATE, '409 namespace_taken', "moving to another project's namespace is refused", (t) => ({
    method: 'PATCH',
    path: `/v1/projects/${ns(t, 'p2')}`,
    token: sessionOf('a')(t),
    json: { namespace: ns(t) },
  })),
  oneRequest(group, UPDATE, '400 invalid_request', 'an icon that is not a data: URL is refused on update, with details', (t) => ({
    method: 'PATCH',
    path: `/v1/projects/${ns(t, 'p2')}`,
    token: sessionOf('a')(t),
    json: { icon: png(8, 8).toString('base64') },
  })),
  oneRequest(group, UPDATE, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'PATCH',
    path: `/v1/projects/${ns(t)}`,
    token: sessionOf('b')(t),
    json: { name: 'Taken over' },
  })),
  unsupportedMediaType(group, UPDATE, (t) => `/v1/projects/${ns(t, 'p2')}`, sessionOf('a')),
  payloadTooLarge(group, UPDATE, (t) => `/v1/projects/${ns(t, 'p2')}`, sessionOf('a')),
  unauthenticated(group, UPDATE, (t) => `/v1/projects/${ns(t)}`, { json: { name: 'x' } }),
  oneRequest(group, DELETE, '400 invalid_request', 'a namespace outside the format is refused', (t) => ({
    method: 'DELETE',
    path: '/v1/projects/NOT_VALID',
    token: sessionOf('a')(t),
  })),
  {
    group,
    op: DELETE,
    expect: '404 not_found',
    title: 'a non-member gets 404 (and the project stays)',
    run: async (t) => {
      t.expect(await t.send({ method: 'DELETE', path: `/v1/projects/${ns(t)}`, token: sessionOf('b')(t) }), 404, 'not_found');
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: sessionOf('a')(t) }), 200);
    },
  },
  sessionRequired(group, DELETE, (t) => `/v1/projects/${ns(t, 'p2')}`),
  unauthenticated(group, DELETE, (t) => `/v1/projects/${ns(t)}`),
];

/** With user B a member of P1 (after the invite cases). */
export const projectMemberCases: CaseDef[] = [
  {
    group,
    op: GET,
    expect: '200',
    title: 'a member who is not the owner reads the project',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: sessionOf('b')(t) }), 200);
      const members = data.members.map((m: { username: string; role: string }) => `${m.username}:${m.role}`);
      t.check(
        data.members.length === 2 &&
          data.members[0].role === 'owner' &&
          data.members[1].id === t.state.b.id &&
          data.members[1].role === 'member',
        `members: the owner first, then B as member (got ${JSON.stringify(members)})`,
      );
    },
  },
  oneRequest(group, UPDATE, '403 not_owner', 'a member who is not the owner may not change the project', (t) => ({
    method: 'PATCH',
    path: `/v1/projects/${ns(t)}`,
    token: sessionOf('b')(t),
    json: { name: 'Renamed by B' },
  })),
  oneRequest(group, DELETE, '403 not_owner', 'a member who is not the owner may not delete the project', (t) => ({
    method: 'DELETE',
    path: `/v1/projects/${ns(t)}`,
    token: sessionOf('b')(t),
  })),
];

export const projectDeleteCases: CaseDef[] = [
  {
    group,
    op: DELETE,
    expect: '204',
    title: 'the owner deletes P2 with a session; it is gone (a second delete is 404)',
    run: async (t) => {
      const namespace = ns(t, 'p2');
      t.expect(await t.send({ method: 'DELETE', path: `/v1/projects/${namespace}`, token: sessionOf('a')(t) }), 204);
      t.ledger.projects.delete(namespace);
      t.state.p2 = undefined;
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${namespace}`, token: sessionOf('a')(t) }), 404, 'not_found');
      t.expect(await t.send({ method: 'DELETE', path: `/v1/projects/${namespace}`, token: sessionOf('a')(t) }), 404, 'not_found');
    },
  },
  {
    group,
    op: DELETE,
    expect: '204',
    title: 'the owner deletes P1 and everything attached (feeds, events, insights, activity)',
    run: async (t) => {
      const namespace = ns(t);
      t.expect(await t.send({ method: 'DELETE', path: `/v1/projects/${namespace}`, token: sessionOf('a')(t) }), 204);
      t.ledger.projects.delete(namespace);
      t.state.p1 = undefined;
      t.expect(await t.send({ method: 'GET', path: `/v1/projects/${namespace}/feeds`, token: sessionOf('a')(t) }), 404, 'not_found');
      const list = t.expect(await t.send({ method: 'GET', path: '/v1/projects', token: sessionOf('a')(t) }), 200);
      t.check(list.items.length === 0, 'user A has no projects left');
    },
  },
];
