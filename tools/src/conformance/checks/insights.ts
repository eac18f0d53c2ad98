/** Insights and the activity log, on P1, with user B a member (members create, change and delete insights). */
import { unknownUuid, type CaseContext, type CaseDef } from '../case.js';
import { badPageSize, newestFirst, ns, oneRequest, payloadTooLarge, sessionOf, unauthenticated, unsupportedMediaType } from './common.js';

const group = 'insights';
const CREATE = 'POST /v1/projects/{namespace}/insights';
const LIST = 'GET /v1/projects/{namespace}/insights';
const UPDATE = 'PATCH /v1/projects/{namespace}/insights/{insight_id}';
const DELETE = 'DELETE /v1/projects/{namespace}/insights/{insight_id}';
const ACTIVITY = 'GET /v1/projects/{namespace}/activity';

const insights = (t: CaseContext, which: 'p1' | 'p2' = 'p1') => `/v1/projects/${ns(t, which)}/insights`;
const numberInsight = (t: CaseContext) => `${insights(t)}/${t.need(t.state.insightNumber, 'a numeric insight')}`;
const apiToken = (t: CaseContext) => t.need(t.state.apiToken, 'an API token').token;

export const insightCases: CaseDef[] = [
  {
    group,
    op: CREATE,
    expect: '201',
    title: 'a member (B) creates a numeric insight',
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'POST', path: insights(t), token: sessionOf('b')(t), json: { title: 'Signups', value: 42, emoji: '📈' } }),
        201,
      );
      t.check(data.title === 'Signups' && data.value === 42 && data.emoji === '📈', 'title, value and emoji come back');
      t.state.insightNumber = data.id;
    },
  },
  {
    group,
    op: CREATE,
    expect: '201',
    title: 'the owner creates a string insight with an API token',
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'POST', path: insights(t), token: apiToken(t), json: { title: 'Status', value: 'green' } }),
        201,
      );
      t.check(data.value === 'green' && data.emoji === null, 'the value, no emoji');
      t.state.insightString = data.id;
    },
  },
  oneRequest(group, CREATE, '400 invalid_request', 'an empty title and a value of the wrong type are refused, with details', (t) => ({
    method: 'POST',
    path: insights(t),
    token: sessionOf('a')(t),
    json: { title: '', value: { nested: true } },
  })),
  oneRequest(group, CREATE, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'POST',
    path: insights(t, 'p2'),
    token: sessionOf('b')(t),
    json: { title: 'Nope', value: 1 },
  })),
  unsupportedMediaType(group, CREATE, insights, sessionOf('a')),
  payloadTooLarge(group, CREATE, insights, sessionOf('a')),
  unauthenticated(group, CREATE, insights, { json: { title: 'x', value: 1 } }),
  {
    group,
    op: LIST,
    expect: '200',
    title: 'a member lists the insights, newest first',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: insights(t), token: sessionOf('b')(t) }), 200);
      const ids = data.items.map((i: { id: string }) => i.id);
      t.check(
        ids.length === 2 && ids[0] === t.state.insightString && ids[1] === t.state.insightNumber,
        `both insights, newest first (got ${ids})`,
      );
      newestFirst(t, data.items, 'insights');
    },
  },
  oneRequest(group, LIST, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'GET',
    path: insights(t, 'p2'),
    token: sessionOf('b')(t),
  })),
  badPageSize(group, LIST, insights, sessionOf('a')),
  unauthenticated(group, LIST, insights),
  {
    group,
    op: UPDATE,
    expect: '200',
    title: 'increment adds to a numeric value',
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'PATCH', path: numberInsight(t), token: sessionOf('b')(t), json: { increment: 5 } }),
        200,
      );
      t.check(data.value === 47, `42 + 5 = 47 (got ${data.value})`);
    },
  },
  {
    group,
    op: UPDATE,
    expect: '200',
    title: 'title, value and emoji change (emoji null removes it)',
    run: async (t) => {
      const data = t.expect(
        await t.send({
          method: 'PATCH',
          path: numberInsight(t),
          token: sessionOf('a')(t),
          json: { title: 'Live', value: true, emoji: null },
        }),
        200,
      );
      t.check(data.title === 'Live' && data.value === true && data.emoji === null, 'the new title, value and no emoji');
      t.check(Date.parse(data.updated_at) >= Date.parse(data.created_at), 'updated_at is not before created_at');
    },
  },
  {
    group,
    op: UPDATE,
    expect: '400 invalid_request',
    title: 'increment on a value that is not a number is refused',
    run: async (t) => {
      const id = t.need(t.state.insightString, 'a string insight');
      t.expect(
        await t.send({ method: 'PATCH', path: `${insights(t)}/${id}`, token: sessionOf('a')(t), json: { increment: 1 } }),
        400,
        'invalid_request',
      );
    },
  },
  oneRequest(group, UPDATE, '400 invalid_request', 'an insight id that is not a UUID is refused', (t) => ({
    method: 'PATCH',
    path: `${insights(t)}/not-a-uuid`,
    token: sessionOf('a')(t),
    json: { title: 'x' },
  })),
  oneRequest(group, UPDATE, '404 not_found', 'an id no insight has is 404', (t) => ({
    method: 'PATCH',
    path: `${insights(t)}/${unknownUuid()}`,
    token: sessionOf('a')(t),
    json: { title: 'x' },
  })),
  unsupportedMediaType(group, UPDATE, numberInsight, sessionOf('a')),
  payloadTooLarge(group, UPDATE, numberInsight, sessionOf('a')),
  unauthenticated(group, UPDATE, numberInsight, { json: { title: 'x' } }),
  {
    group,
    op: DELETE,
    expect: '204',
    title: 'a member deletes an insight; a second delete is 404',
    run: async (t) => {
      const path = `${insights(t)}/${t.need(t.state.insightString, 'a string insight')}`;
      t.expect(await t.send({ method: 'DELETE', path, token: sessionOf('b')(t) }), 204);
      t.expect(await t.send({ method: 'DELETE', path, token: sessionOf('b')(t) }), 404, 'not_found');
    },
  },
  oneRequest(group, DELETE, '400 invalid_request', 'an insight id that is not a UUID is refused', (t) => ({
    method: 'DELETE',
    path: `${insights(t)}/not-a-uuid`,
    token: sessionOf('a')(t),
  })),
  oneRequest(group, DELETE, '404 not_found', 'an insight of a project the caller is no member of is 404 (and stays)', (t) => ({
    method: 'DELETE',
    path: `/v1/projects/${ns(t, 'p2')}/insights/${t.need(t.state.insightNumber, 'a numeric insight')}`,
    token: sessionOf('a')(t),
  })),
  unauthenticated(group, DELETE, numberInsight),
  {
    group: 'activity',
    op: ACTIVITY,
    expect: '200',
    title: "the project's log, newest first, records what the run did",
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}/activity?limit=100`, token: sessionOf('b')(t) }),
        200,
      );
      const types = new Set(data.items.map((i: { type: string }) => i.type));
      for (const type of [
        'project.created',
        'invite.created',
        'invite.revoked',
        'member.joined',
        'insight.created',
        'insight.updated',
        'insight.deleted',
      ]) {
        t.check(types.has(type), `an ${type} record (got ${[...types].join(', ')})`);
      }
      newestFirst(t, data.items, 'activity records');
      const created = data.items.find((i: { type: string }) => i.type === 'project.created');
      t.check(created?.actor?.id === t.state.a.id, 'project.created names A as actor');
    },
  },
  oneRequest('activity', ACTIVITY, '400 invalid_request', 'a cursor the service did not issue is refused', (t) => ({
    method: 'GET',
    path: `/v1/projects/${ns(t)}/activity?cursor=bogus`,
    token: sessionOf('a')(t),
  })),
  oneRequest('activity', ACTIVITY, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'GET',
    path: `/v1/projects/${ns(t, 'p2')}/activity`,
    token: sessionOf('b')(t),
  })),
  unauthenticated('activity', ACTIVITY, (t) => `/v1/projects/${ns(t)}/activity`),
];
