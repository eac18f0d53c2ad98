/**
 * LogSnag's routes on P1 (spec/logsnag.tsp): an event logged to a channel the project does not have
 * yet (the feed made once, the event where the native list shows it), an insight set and then
 * incremented by its title, an end user identified; a 400 that carries LogSnag's `validation` beside
 * the envelope; a project the caller is not a member of (P2, B's) is 404, as on every project route.
 * With A's API token, the credential LogSnag's clients send.
 */
import type { CaseContext, CaseDef } from '../case.js';
import type { Exchange, Request } from '../http.js';
import { expectDetails, ns, oneRequest, payloadTooLarge, sessionOf, unauthenticated, unsupportedMediaType } from './common.js';

const group = 'logsnag';
const LOG = 'POST /v1/log';
const SET = 'POST /v1/insight';
const INCREMENT = 'PATCH /v1/insight';
const IDENTIFY = 'POST /v1/identify';

const apiToken = (t: CaseContext) => t.need(t.state.apiToken, 'an API token').token;
const path = (op: string) => () => op.split(' ')[1]!;
const channel = 'logsnag';
const title = (t: CaseContext) => `LogSnag ${t.state.tag}`;

/** A 400 `invalid_request` with its details, and LogSnag's `validation.body`: one message per detail. */
function expectValidation(t: CaseContext, exchange: Exchange): void {
  t.expect(exchange, 400, 'invalid_request');
  expectDetails(t, exchange.json);
  const messages = exchange.json?.validation?.body as { message?: unknown }[] | undefined;
  t.check(
    Array.isArray(messages) &&
      messages.length === exchange.json.error.details.length &&
      messages.every((m) => typeof m.message === 'string' && m.message !== ''),
    `validation.body holds one message per detail (got ${JSON.stringify(exchange.json?.validation)})`,
    exchange,
  );
}

function refused(op: string, title: string, body: (t: CaseContext) => unknown): CaseDef {
  return {
    group,
    op,
    expect: '400 invalid_request',
    title,
    run: async (t) => {
      const [method, route] = op.split(' ') as [string, string];
      expectValidation(t, await t.send({ method, path: route, token: apiToken(t), json: body(t) }));
    },
  };
}

function notMember(op: string, body: Record<string, unknown>): CaseDef {
  const [method, route] = op.split(' ') as [string, string];
  return oneRequest(group, op, '404 not_found', 'a project the caller is not a member of is 404 (B, P2)', (t): Request => ({
    method,
    path: route,
    token: sessionOf('b')(t),
    json: { project: ns(t, 'p2'), ...body },
  }));
}

export const logsnagCases: CaseDef[] = [
  {
    group,
    op: LOG,
    expect: '200',
    title: 'an event logged to a new channel: the feed is made once, icon is the emoji, timestamp in Unix seconds',
    run: async (t) => {
      const seconds = Math.floor(Date.now() / 1000) - 60;
      const body = {
        project: ns(t),
        channel,
        event: 'Logged like LogSnag',
        description: 'from the conformance suite',
        icon: '🪵',
        tags: { run: t.state.tag },
        user_id: `${t.state.tag}-user`,
        notify: true,
        timestamp: seconds,
      };
      const first = t.expect(await t.send({ method: 'POST', path: '/v1/log', token: apiToken(t), json: body }), 200);
      t.check(
        first.feed === channel &&
          first.event === body.event &&
          first.emoji === '🪵' &&
          first.user_id === body.user_id &&
          first.notify === true,
        `the channel as the feed, icon as the emoji, user_id and notify (got ${JSON.stringify(first)})`,
      );
      t.check(Date.parse(first.timestamp) === seconds * 1000, `the timestamp from Unix seconds (got ${first.timestamp})`);
      const second = t.expect(
        await t.send({ method: 'POST', path: '/v1/log', token: apiToken(t), json: { project: ns(t), channel, event: 'Again' } }),
        200,
      );
      const feeds = t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}/feeds`, token: sessionOf('a')(t) }), 200);
      const named = (feeds.items as { name: string }[]).filter((feed) => feed.name === channel);
      t.check(named.length === 1, `one feed "${channel}" (got ${named.length})`);
      const listed = t.expect(
        await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}/events?feed=${channel}`, token: sessionOf('a')(t) }),
        200,
      );
      const ids = (listed.items as { id: string }[]).map((event) => event.id);
      t.check(ids[0] === second.id && ids[1] === first.id, `both events in the feed, newest first (got ${ids.join(', ')})`);
    },
  },
  refused(LOG, 'a channel outside [a-z0-9-] and an event of the wrong type: the envelope, and validation.body', (t) => ({
    project: ns(t),
    channel: 'Not A Channel',
    event: 42,
  })),
  notMember(LOG, { channel, event: 'Nope' }),
  unsupportedMediaType(group, LOG, path(LOG), apiToken),
  payloadTooLarge(group, LOG, path(LOG), apiToken),
  unauthenticated(group, LOG, path(LOG), { json: { project: 'conformance', channel, event: 'x' } }),
  {
    group,
    op: SET,
    expect: '200',
    title: 'an insight set by its title: made on first use, the same one set again',
    run: async (t) => {
      const set = (value: unknown) =>
        t.send({ method: 'POST', path: '/v1/insight', token: apiToken(t), json: { project: ns(t), title: title(t), value, icon: '📏' } });
      const made = t.expect(await set(40), 200);
      t.check(
        made.title === title(t) && made.value === 40 && made.emoji === '📏',
        `the insight, icon as the emoji (got ${JSON.stringify(made)})`,
      );
      const again = t.expect(await set(41), 200);
      t.check(again.id === made.id && again.value === 41, `the same insight, its new value (got ${JSON.stringify(again)})`);
    },
  },
  refused(SET, 'a value that is an object: the envelope, and validation.body', (t) => ({ project: ns(t), title: title(t), value: {} })),
  notMember(SET, { title: 'Nope', value: 1 }),
  unsupportedMediaType(group, SET, path(SET), apiToken),
  payloadTooLarge(group, SET, path(SET), apiToken),
  unauthenticated(group, SET, path(SET), { json: { project: 'conformance', title: 'x', value: 1 } }),
  {
    group,
    op: INCREMENT,
    expect: '200',
    title: 'value.$inc adds to the insight of that title (negative too)',
    run: async (t) => {
      const increment = (by: number) =>
        t.send({
          method: 'PATCH',
          path: '/v1/insight',
          token: apiToken(t),
          json: { project: ns(t), title: title(t), value: { $inc: by } },
        });
      const before = t.expect(await increment(2), 200);
      const after = t.expect(await increment(-0.5), 200);
      t.check(after.id === before.id && after.value === before.value - 0.5, `+2, then -0.5 (got ${before.value}, ${after.value})`);
    },
  },
  {
    group,
    op: INCREMENT,
    expect: '400 invalid_request',
    title: 'an increment of an insight whose value is not a number: the envelope, and validation.body',
    run: async (t) => {
      const text = `${title(t)} text`;
      t.expect(
        await t.send({ method: 'POST', path: '/v1/insight', token: apiToken(t), json: { project: ns(t), title: text, value: 'green' } }),
        200,
      );
      const exchange = await t.send({
        method: 'PATCH',
        path: '/v1/insight',
        token: apiToken(t),
        json: { project: ns(t), title: text, value: { $inc: 1 } },
      });
      expectValidation(t, exchange);
    },
  },
  notMember(INCREMENT, { title: 'Nope', value: { $inc: 1 } }),
  unsupportedMediaType(group, INCREMENT, path(INCREMENT), apiToken),
  payloadTooLarge(group, INCREMENT, path(INCREMENT), apiToken),
  unauthenticated(group, INCREMENT, path(INCREMENT), { json: { project: 'conformance', title: 'x', value: { $inc: 1 } } }),
  {
    group,
    op: IDENTIFY,
    expect: '200',
    title: 'an end user identified: properties merged, a later value replacing an earlier one',
    run: async (t) => {
      const identify = (properties: Record<string, unknown>) =>
        t.send({
          method: 'POST',
          path: '/v1/identify',
          token: apiToken(t),
          json: { project: ns(t), user_id: `${t.state.tag}-user`, properties },
        });
      t.expect(await identify({ plan: 'free', seats: 1 }), 200);
      const merged = t.expect(await identify({ plan: 'pro' }), 200);
      t.check(
        merged.properties?.plan === 'pro' && merged.properties?.seats === 1,
        `plan replaced, seats kept (got ${JSON.stringify(merged.properties)})`,
      );
    },
  },
  refused(IDENTIFY, 'a property key outside [a-z0-9-]: the envelope, and validation.body', (t) => ({
    project: ns(t),
    user_id: `${t.state.tag}-user`,
    properties: { 'Not A Key': 1 },
  })),
  notMember(IDENTIFY, { user_id: 'nobody', properties: { a: 1 } }),
  unsupportedMediaType(group, IDENTIFY, path(IDENTIFY), apiToken),
  payloadTooLarge(group, IDENTIFY, path(IDENTIFY), apiToken),
  unauthenticated(group, IDENTIFY, path(IDENTIFY), { json: { project: 'conformance', user_id: 'x', properties: {} } }),
];
