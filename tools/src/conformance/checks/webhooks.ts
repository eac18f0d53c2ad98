/**
 * Webhook endpoints on P1, managed by user B, a member. The suite never needs a receiver: every
 * endpoint it makes points at a name under `.invalid`, which never resolves, so a test or a retry
 * answers 200 with the attempt's `error`, and the deployment's own deliveries to it just fail.
 * Endpoint W stays for the conditional reads (conditional.ts) and is deleted after them
 * (`webhookDeleteCases`); the endpoints made to fill the project's cap, or that a deployment
 * allowing http or private addresses accepted, are deleted by the case that made them. Deleting P1
 * at the end removes anything a failed case left.
 *
 * 409 `event_expired` (a retry of a delivery whose event retention deleted) cannot be provoked: see
 * coverage.ts.
 */
import { unknownUuid, type CaseContext, type CaseDef } from '../case.js';
import {
  badPageSize,
  expectDetails,
  newestFirst,
  ns,
  oneRequest,
  payloadTooLarge,
  sessionOf,
  unauthenticated,
  unsupportedMediaType,
} from './common.js';

const group = 'webhooks';
const LIST = 'GET /v1/projects/{namespace}/webhooks';
const CREATE = 'POST /v1/projects/{namespace}/webhooks';
const GET = 'GET /v1/projects/{namespace}/webhooks/{webhook_id}';
const UPDATE = 'PATCH /v1/projects/{namespace}/webhooks/{webhook_id}';
const DELETE = 'DELETE /v1/projects/{namespace}/webhooks/{webhook_id}';
const ROTATE = 'POST /v1/projects/{namespace}/webhooks/{webhook_id}/secret';
const TEST = 'POST /v1/projects/{namespace}/webhooks/{webhook_id}/test';
const DELIVERIES = 'GET /v1/projects/{namespace}/webhooks/{webhook_id}/deliveries';
const RETRY = 'POST /v1/projects/{namespace}/webhooks/{webhook_id}/deliveries/{delivery_id}/retry';
const RECOVER = 'POST /v1/projects/{namespace}/webhooks/{webhook_id}/recover';

/** The endpoints a project may have, as the contract documents it. */
const DOCUMENTED_CAP = 10;
/** An address that never resolves (RFC 6761): sends to it fail at once, on any deployment. */
const NOWHERE = 'https://hooks.invalid/conformance';

const webhooks = (t: CaseContext, which: 'p1' | 'p2' = 'p1') => `/v1/projects/${ns(t, which)}/webhooks`;
const endpoint = (t: CaseContext) => `${webhooks(t)}/${t.need(t.state.webhook, 'webhook endpoint W')}`;
const unknownEndpoint = (t: CaseContext) => `${webhooks(t)}/${unknownUuid()}`;
const member = sessionOf('b');
const owner = sessionOf('a');

async function deleteEndpoint(t: CaseContext, id: string): Promise<void> {
  t.expect(await t.send({ method: 'DELETE', path: `${webhooks(t)}/${id}`, token: owner(t) }), 204);
}

/** 400 `invalid_request` whose details point at `/body/url`. */
function expectUrlRefused(t: CaseContext, exchange: Awaited<ReturnType<CaseContext['send']>>): void {
  t.expect(exchange, 400, 'invalid_request');
  expectDetails(t, exchange.json);
  const paths = ((exchange.json?.error?.details ?? []) as { path: string }[]).map((detail) => detail.path);
  t.check(paths.includes('/body/url'), `the details point at /body/url (got ${JSON.stringify(paths)})`, exchange);
}

/**
 * Addresses every deployment refuses, and those it refuses unless its operator opened them
 * (`unless`): a deployment that accepts one of those is noted, and the endpoint deleted.
 */
const REFUSED_URLS: { url: string; what: string; unless?: string }[] = [
  { url: 'not a url', what: 'a URL that is no URL' },
  { url: 'ftp://hooks.invalid/conformance', what: 'a scheme other than https' },
  { url: 'https://conformance:x@hooks.invalid/', what: 'a user name and password in the URL' },
  { url: 'http://hooks.invalid/conformance', what: 'plain http', unless: 'WEBHOOK_ALLOW_HTTP' },
  { url: 'https://127.0.0.1/', what: 'a loopback address', unless: 'WEBHOOK_ALLOW_PRIVATE' },
  { url: 'https://[::ffff:127.0.0.1]/', what: 'a loopback address as IPv4-mapped IPv6', unless: 'WEBHOOK_ALLOW_PRIVATE' },
  { url: 'https://2130706433/', what: 'a loopback address spelled as one number', unless: 'WEBHOOK_ALLOW_PRIVATE' },
  { url: 'https://10.0.0.1/', what: 'a private address', unless: 'WEBHOOK_ALLOW_PRIVATE' },
];

/** Requests on W's routes that name what does not exist or is malformed: each one request, one answer. */
const ROUTE_REFUSALS: [op: string, method: string, suffix: string, json?: unknown][] = [
  [GET, 'GET', '', undefined],
  [UPDATE, 'PATCH', '', { description: 'x' }],
  [DELETE, 'DELETE', '', undefined],
  [ROTATE, 'POST', '/secret', undefined],
  [TEST, 'POST', '/test', undefined],
  [DELIVERIES, 'GET', '/deliveries', undefined],
  [RECOVER, 'POST', '/recover', { since: '2026-01-01T00:00:00.000Z' }],
];

export const webhookCases: CaseDef[] = [
  {
    group,
    op: LIST,
    expect: '200',
    title: 'a project has no webhook endpoints to begin with',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: webhooks(t), token: member(t) }), 200);
      t.check(data.items.length === 0 && data.next_cursor === null, `no endpoints (got ${JSON.stringify(data.items)})`);
    },
  },
  {
    group,
    op: CREATE,
    expect: '201',
    title: 'a member creates an endpoint; the answer shows its secret (once), its filter in full and nothing waiting',
    run: async (t) => {
      const json = { url: NOWHERE, description: 'Conformance', filter: { types: ['event.created'], feeds: ['general'] } };
      const data = t.expect(await t.send({ method: 'POST', path: webhooks(t), token: member(t), json }), 201);
      t.check(typeof data.secret === 'string' && data.secret.startsWith('whsec_'), 'a signing secret, whsec_…');
      t.check(data.url === NOWHERE && data.description === 'Conformance', 'the url and description given');
      t.check(data.format === 'standard' && data.enabled === true && data.disabled_reason === null, 'standard, enabled, by default');
      t.check(
        JSON.stringify(data.filter) === JSON.stringify({ types: ['event.created'], feeds: ['general'], tags: [], notify_only: false }),
        `every field of the filter (got ${JSON.stringify(data.filter)})`,
      );
      t.check(data.pending_deliveries === 0, 'nothing waiting');
      t.state.webhook = data.id;
    },
  },
  ...REFUSED_URLS.map(({ url, what, unless }): CaseDef => ({
    group,
    op: CREATE,
    expect: '400 invalid_request',
    title: `${what} is refused, pointing at /body/url${unless ? ` (unless the deployment sets ${unless})` : ''}`,
    run: async (t) => {
      const exchange = await t.send({ method: 'POST', path: webhooks(t), token: member(t), json: { url } });
      if (unless && exchange.status === 201) {
        t.note(`this deployment accepts ${what} (${unless})`);
        await deleteEndpoint(t, exchange.json.data.id);
        return;
      }
      expectUrlRefused(t, exchange);
    },
  })),
  oneRequest(group, CREATE, '400 invalid_request', 'a filter naming webhook.test, which cannot be subscribed to, is refused', (t) => ({
    method: 'POST',
    path: webhooks(t),
    token: member(t),
    json: { url: NOWHERE, filter: { types: ['webhook.test'] } },
  })),
  oneRequest(group, CREATE, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'POST',
    path: webhooks(t, 'p2'),
    token: member(t),
    json: { url: NOWHERE },
  })),
  {
    group,
    op: CREATE,
    expect: '409 limit_reached',
    title: `past the cap of endpoints a project may have (${DOCUMENTED_CAP}), another is refused; those made to fill it are deleted`,
    run: async (t) => {
      const listed = t.expect(await t.send({ method: 'GET', path: `${webhooks(t)}?limit=100`, token: owner(t) }), 200);
      const made: string[] = [];
      try {
        for (let n = listed.items.length; n <= DOCUMENTED_CAP; n++) {
          const exchange = await t.send({ method: 'POST', path: webhooks(t), token: owner(t), json: { url: NOWHERE } });
          if (exchange.status === 409) {
            t.expect(exchange, 409, 'limit_reached');
            return;
          }
          made.push(t.expect(exchange, 201).id);
        }
        t.note(
          `this deployment allows more than ${DOCUMENTED_CAP} endpoints a project (MAX_WEBHOOKS_PER_PROJECT): the suite fills no more`,
        );
        t.state.webhookCapUnreached = true;
      } finally {
        for (const id of made) await deleteEndpoint(t, id);
      }
    },
  },
  unsupportedMediaType(group, CREATE, webhooks, owner),
  payloadTooLarge(group, CREATE, webhooks, owner),
  unauthenticated(group, CREATE, webhooks, { json: { url: NOWHERE } }),
  {
    group,
    op: LIST,
    expect: '200',
    title: 'the list shows the endpoint, without its secret',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: webhooks(t), token: member(t) }), 200);
      t.check(
        data.items.length === 1 && data.items[0].id === t.state.webhook && !('secret' in data.items[0]),
        `W alone, without a secret (got ${JSON.stringify(data.items)})`,
      );
    },
  },
  badPageSize(group, LIST, webhooks, owner),
  oneRequest(group, LIST, '404 not_found', 'a non-member gets 404', (t) => ({ method: 'GET', path: webhooks(t, 'p2'), token: member(t) })),
  unauthenticated(group, LIST, webhooks),
  {
    group,
    op: GET,
    expect: '200',
    title: 'a member reads the endpoint, without its secret',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: endpoint(t), token: member(t) }), 200);
      t.check(data.id === t.state.webhook && data.url === NOWHERE && !('secret' in data), 'W, without a secret');
    },
  },
  {
    group,
    op: TEST,
    expect: '200',
    title: 'a test to an address that never resolves answers 200 with the error, and no status',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'POST', path: `${endpoint(t)}/test`, token: member(t) }), 200);
      t.check(data.status_code === null && data.body === null, `no answer came (got ${JSON.stringify(data)})`);
      t.check(typeof data.error === 'string' && data.error.length > 0, `the error says why (got ${JSON.stringify(data)})`);
    },
  },
  {
    group,
    op: DELIVERIES,
    expect: '200',
    title: 'an event published to a feed the filter names is a delivery of type event.created',
    run: async (t) => {
      const event = t.expect(
        await t.send({
          method: 'POST',
          path: `/v1/projects/${ns(t)}/feeds/general/events`,
          token: owner(t),
          json: { event: 'For the webhook', tags: { run: t.state.tag } },
        }),
        201,
      );
      t.state.events.push({ id: event.id, feed: event.feed });
      const data = t.expect(await t.send({ method: 'GET', path: `${endpoint(t)}/deliveries`, token: member(t) }), 200);
      t.check(data.items.length >= 1, `at least one delivery (got ${JSON.stringify(data.items)})`);
      t.check(
        data.items.every((d: { type: string }) => d.type === 'event.created'),
        'every delivery is an event.created (the filter names no other type)',
      );
      newestFirst(t, data.items, 'deliveries');
      t.state.delivery = data.items[0].id;
    },
  },
  badPageSize(group, DELIVERIES, (t) => `${endpoint(t)}/deliveries`, owner),
  unauthenticated(group, DELIVERIES, (t) => `${endpoint(t)}/deliveries`),
  {
    group,
    op: RETRY,
    expect: '200',
    title: 'a retry now answers the delivery, same id, with the attempt just made (failed: the address never resolves)',
    run: async (t) => {
      const delivery = t.need(t.state.delivery, 'a delivery of W');
      const data = t.expect(await t.send({ method: 'POST', path: `${endpoint(t)}/deliveries/${delivery}/retry`, token: member(t) }), 200);
      t.check(data.id === delivery && data.state !== 'delivered', `the same delivery, not delivered (got ${JSON.stringify(data)})`);
      const latest = data.attempts[0];
      t.check(
        latest?.status_code === null && typeof latest?.error === 'string',
        `its newest attempt failed (got ${JSON.stringify(latest)})`,
      );
    },
  },
  oneRequest(group, RETRY, '400 invalid_request', 'a delivery id that is not a UUID is refused', (t) => ({
    method: 'POST',
    path: `${endpoint(t)}/deliveries/not-a-uuid/retry`,
    token: member(t),
  })),
  oneRequest(group, RETRY, '404 not_found', 'an id no delivery of the endpoint has is 404', (t) => ({
    method: 'POST',
    path: `${endpoint(t)}/deliveries/${unknownUuid()}/retry`,
    token: member(t),
  })),
  unauthenticated(group, RETRY, (t) => `${endpoint(t)}/deliveries/${t.need(t.state.delivery, 'a delivery of W')}/retry`),
  {
    group,
    op: RECOVER,
    expect: '200',
    title: 'recovering since an hour ago queues the matching events again; nothing left over',
    run: async (t) => {
      const since = new Date(Date.now() - 3_600_000).toISOString();
      const data = t.expect(await t.send({ method: 'POST', path: `${endpoint(t)}/recover`, token: member(t), json: { since } }), 200);
      t.check(data.queued >= 1 && data.resume_since === null, `at least the event just published, all of it (got ${JSON.stringify(data)})`);
    },
  },
  oneRequest(group, RECOVER, '400 invalid_request', 'a since that is no instant is refused, with details', (t) => ({
    method: 'POST',
    path: `${endpoint(t)}/recover`,
    token: member(t),
    json: { since: 'yesterday' },
  })),
  unsupportedMediaType(group, RECOVER, (t) => `${endpoint(t)}/recover`, owner),
  payloadTooLarge(group, RECOVER, (t) => `${endpoint(t)}/recover`, owner),
  unauthenticated(group, RECOVER, (t) => `${endpoint(t)}/recover`, { json: { since: '2026-01-01T00:00:00.000Z' } }),
  {
    group,
    op: ROTATE,
    expect: '200',
    title: 'a new secret; the old one keeps signing for about 24 hours',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'POST', path: `${endpoint(t)}/secret`, token: member(t) }), 200);
      t.check(typeof data.secret === 'string' && data.secret.startsWith('whsec_'), 'a signing secret, whsec_…');
      const overlap = Date.parse(data.previous_expires_at) - Date.now();
      t.check(
        overlap > 23 * 3_600_000 && overlap <= 24 * 3_600_000 + 60_000,
        `previous_expires_at about 24 h ahead (got ${data.previous_expires_at})`,
      );
    },
  },
  unauthenticated(group, ROTATE, (t) => `${endpoint(t)}/secret`),
  unauthenticated(group, TEST, (t) => `${endpoint(t)}/test`),
  {
    group,
    op: UPDATE,
    expect: '200',
    title: 'a member turns the endpoint off and replaces its filter; what is left out is kept',
    run: async (t) => {
      const json = { enabled: false, description: null, filter: { types: ['member.joined', 'member.left'] } };
      const data = t.expect(await t.send({ method: 'PATCH', path: endpoint(t), token: member(t), json }), 200);
      t.check(data.enabled === false && data.disabled_reason === null, 'off, by a member: no disabled_reason');
      t.check(data.description === null && data.url === NOWHERE && data.format === 'standard', 'no description; url and format kept');
      t.check(
        JSON.stringify(data.filter) ===
          JSON.stringify({ types: ['member.joined', 'member.left'], feeds: [], tags: [], notify_only: false }),
        `the whole filter replaced (got ${JSON.stringify(data.filter)})`,
      );
    },
  },
  {
    group,
    op: UPDATE,
    expect: '400 invalid_request',
    title: 'an address other than https is refused on a change too, pointing at /body/url',
    run: async (t) => {
      expectUrlRefused(t, await t.send({ method: 'PATCH', path: endpoint(t), token: member(t), json: { url: 'ftp://hooks.invalid/' } }));
    },
  },
  unsupportedMediaType(group, UPDATE, endpoint, owner),
  payloadTooLarge(group, UPDATE, endpoint, owner),
  unauthenticated(group, UPDATE, endpoint, { json: { enabled: true } }),
  unauthenticated(group, GET, endpoint),
  unauthenticated(group, DELETE, endpoint),
  // Every route of one endpoint: an id that is not a UUID (400), one no endpoint of P1 has (404),
  // and W named in a project the caller is no member of (404, and W stays).
  ...ROUTE_REFUSALS.flatMap(([op, method, suffix, json]): CaseDef[] => [
    oneRequest(group, op, '400 invalid_request', 'a webhook id that is not a UUID is refused', (t) => ({
      method,
      path: `${webhooks(t)}/not-a-uuid${suffix}`,
      token: member(t),
      ...(json === undefined ? {} : { json }),
    })),
    oneRequest(group, op, '404 not_found', 'an id no endpoint of the project has is 404', (t) => ({
      method,
      path: `${unknownEndpoint(t)}${suffix}`,
      token: member(t),
      ...(json === undefined ? {} : { json }),
    })),
    oneRequest(group, op, '404 not_found', 'the endpoint, named in a project the caller is no member of, is 404', (t) => ({
      method,
      path: `${webhooks(t, 'p2')}/${t.need(t.state.webhook, 'webhook endpoint W')}${suffix}`,
      token: member(t),
      ...(json === undefined ? {} : { json }),
    })),
  ]),
];

/** After the conditional reads, which read W: W deleted, and then gone. */
export const webhookDeleteCases: CaseDef[] = [
  {
    group,
    op: DELETE,
    expect: '204',
    title: 'a member deletes the endpoint; it is gone, and a second delete is 404',
    run: async (t) => {
      const path = endpoint(t);
      t.expect(await t.send({ method: 'DELETE', path, token: member(t) }), 204);
      t.state.webhook = undefined;
      t.state.delivery = undefined;
      t.expect(await t.send({ method: 'GET', path, token: member(t) }), 404, 'not_found');
      t.expect(await t.send({ method: 'DELETE', path, token: member(t) }), 404, 'not_found');
      const data = t.expect(await t.send({ method: 'GET', path: webhooks(t), token: member(t) }), 200);
      t.check(data.items.length === 0, `no endpoints left (got ${JSON.stringify(data.items)})`);
    },
  },
];
