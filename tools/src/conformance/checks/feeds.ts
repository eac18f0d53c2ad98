/**
 * Feeds and events on P1: feeds listed, made, changed, deleted (never the last one); events published
 * (with an API token, the usual way), listed with filters, and streamed live (SSE), with
 * `Last-Event-ID` resumption; then batches of events, all or nothing. The batch cases come last: the
 * list and stream cases count on the events published before them.
 */
import type { CaseContext, CaseDef } from '../case.js';
import { readEvents } from '../http.js';
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

const FEEDS = 'feeds';
const EVENTS = 'events';
const LIST = 'GET /v1/projects/{namespace}/feeds';
const CREATE = 'POST /v1/projects/{namespace}/feeds';
const UPDATE = 'PATCH /v1/projects/{namespace}/feeds/{feed}';
const DELETE = 'DELETE /v1/projects/{namespace}/feeds/{feed}';
const PUBLISH = 'POST /v1/projects/{namespace}/feeds/{feed}/events';
const EVENT_LIST = 'GET /v1/projects/{namespace}/events';
const STREAM = 'GET /v1/projects/{namespace}/events/stream';
const BATCH = 'POST /v1/projects/{namespace}/events';

const feeds = (t: CaseContext, which: 'p1' | 'p2' = 'p1') => `/v1/projects/${ns(t, which)}/feeds`;
const signups = (t: CaseContext) => `${feeds(t)}/signups`;
const publishPath = (t: CaseContext) => `${signups(t)}/events`;
const batchPath = (t: CaseContext) => `/v1/projects/${ns(t)}/events`;
const apiToken = (t: CaseContext) => t.need(t.state.apiToken, 'an API token').token;

async function publish(t: CaseContext, event: string, token: string = apiToken(t)) {
  const data = t.expect(await t.send({ method: 'POST', path: publishPath(t), token, json: { event, tags: { run: t.state.tag } } }), 201);
  t.state.events.push({ id: data.id, feed: data.feed });
  return data;
}

export const feedCases: CaseDef[] = [
  {
    group: FEEDS,
    op: LIST,
    expect: '200',
    title: 'a new project has one feed, "general", type 0',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: feeds(t), token: sessionOf('b')(t) }), 200);
      t.check(
        data.items.length === 1 && data.items[0].name === 'general' && data.items[0].type === 0,
        `one feed "general" (got ${JSON.stringify(data.items)})`,
      );
    },
  },
  badPageSize(FEEDS, LIST, feeds, sessionOf('a')),
  oneRequest(FEEDS, LIST, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'GET',
    path: feeds(t, 'p2'),
    token: sessionOf('b')(t),
  })),
  unauthenticated(FEEDS, LIST, feeds),
  {
    group: FEEDS,
    op: CREATE,
    expect: '201',
    title: 'a member creates the feed "signups"',
    run: async (t) => {
      const data = t.expect(
        await t.send({
          method: 'POST',
          path: feeds(t),
          token: sessionOf('b')(t),
          json: { name: 'signups', description: 'New accounts', emoji: '🎉' },
        }),
        201,
      );
      t.check(
        data.name === 'signups' && data.description === 'New accounts' && data.emoji === '🎉' && data.type === 0,
        'name, description, emoji, type 0',
      );
    },
  },
  oneRequest(FEEDS, CREATE, '409 feed_name_taken', 'a feed name in use in the project is refused', (t) => ({
    method: 'POST',
    path: feeds(t),
    token: sessionOf('a')(t),
    json: { name: 'general' },
  })),
  oneRequest(FEEDS, CREATE, '400 invalid_request', 'a name outside [a-z0-9-] and an undefined type are refused, with details', (t) => ({
    method: 'POST',
    path: feeds(t),
    token: sessionOf('a')(t),
    json: { name: 'Not A Name', type: 7 },
  })),
  oneRequest(FEEDS, CREATE, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'POST',
    path: feeds(t, 'p2'),
    token: sessionOf('b')(t),
    json: { name: 'intruder' },
  })),
  unsupportedMediaType(FEEDS, CREATE, feeds, sessionOf('a')),
  payloadTooLarge(FEEDS, CREATE, feeds, sessionOf('a')),
  unauthenticated(FEEDS, CREATE, feeds, { json: { name: 'x' } }),
  {
    group: FEEDS,
    op: UPDATE,
    expect: '200',
    title: 'a member changes a feed (description null removes it)',
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'PATCH', path: signups(t), token: sessionOf('b')(t), json: { description: null, emoji: '✅' } }),
        200,
      );
      t.check(data.name === 'signups' && data.description === null && data.emoji === '✅', 'no description, the new emoji');
    },
  },
  oneRequest(FEEDS, UPDATE, '409 feed_name_taken', "renaming to another feed's name is refused", (t) => ({
    method: 'PATCH',
    path: signups(t),
    token: sessionOf('a')(t),
    json: { name: 'general' },
  })),
  oneRequest(FEEDS, UPDATE, '400 invalid_request', 'a feed name outside the format in the path is refused', (t) => ({
    method: 'PATCH',
    path: `${feeds(t)}/Not_A_Feed`,
    token: sessionOf('a')(t),
    json: { emoji: null },
  })),
  oneRequest(FEEDS, UPDATE, '404 not_found', 'a feed the project does not have is 404', (t) => ({
    method: 'PATCH',
    path: `${feeds(t)}/no-such-feed`,
    token: sessionOf('a')(t),
    json: { emoji: null },
  })),
  unsupportedMediaType(FEEDS, UPDATE, signups, sessionOf('a')),
  payloadTooLarge(FEEDS, UPDATE, signups, sessionOf('a')),
  unauthenticated(FEEDS, UPDATE, signups, { json: { emoji: null } }),
  {
    group: FEEDS,
    op: DELETE,
    expect: '204',
    title: 'a member deletes a feed; it is no longer listed',
    run: async (t) => {
      t.expect(await t.send({ method: 'POST', path: feeds(t), token: sessionOf('a')(t), json: { name: 'to-delete' } }), 201);
      t.expect(await t.send({ method: 'DELETE', path: `${feeds(t)}/to-delete`, token: sessionOf('b')(t) }), 204);
      const data = t.expect(await t.send({ method: 'GET', path: feeds(t), token: sessionOf('a')(t) }), 200);
      t.check(!data.items.some((f: { name: string }) => f.name === 'to-delete'), 'the feed is gone');
    },
  },
  oneRequest(FEEDS, DELETE, '409 last_feed', "a project's last feed cannot be deleted", (t) => ({
    method: 'DELETE',
    path: `${feeds(t, 'p2')}/general`,
    token: sessionOf('a')(t),
  })),
  oneRequest(FEEDS, DELETE, '400 invalid_request', 'a feed name outside the format in the path is refused', (t) => ({
    method: 'DELETE',
    path: `${feeds(t)}/Not_A_Feed`,
    token: sessionOf('a')(t),
  })),
  oneRequest(FEEDS, DELETE, '404 not_found', 'a feed the project does not have is 404', (t) => ({
    method: 'DELETE',
    path: `${feeds(t)}/no-such-feed`,
    token: sessionOf('a')(t),
  })),
  unauthenticated(FEEDS, DELETE, (t) => `${feeds(t)}/general`),
  {
    group: EVENTS,
    op: PUBLISH,
    expect: '201',
    title: 'an event is published with an API token, with description, emoji, tags and a timestamp',
    run: async (t) => {
      const timestamp = new Date(Date.now() - 60_000).toISOString();
      const body = {
        event: 'New signup',
        description: 'Someone signed up',
        emoji: '🎉',
        tags: { plan: 'pro', seats: 3, trial: true },
        timestamp,
      };
      const data = t.expect(await t.send({ method: 'POST', path: publishPath(t), token: apiToken(t), json: body }), 201);
      t.state.events.push({ id: data.id, feed: data.feed });
      t.check(
        data.feed === 'signups' && data.event === 'New signup' && data.description === 'Someone signed up' && data.emoji === '🎉',
        'feed, event, description, emoji',
      );
      t.check(
        JSON.stringify(data.tags) === JSON.stringify(body.tags) ||
          (data.tags.plan === 'pro' && data.tags.seats === 3 && data.tags.trial === true),
        `the tags (got ${JSON.stringify(data.tags)})`,
      );
      t.check(Date.parse(data.timestamp) === Date.parse(timestamp), `the timestamp given (got ${data.timestamp})`);
    },
  },
  {
    group: EVENTS,
    op: PUBLISH,
    expect: '201',
    title: 'a member publishes with a session; the timestamp defaults to now',
    run: async (t) => {
      const data = await publish(t, 'Second signup', sessionOf('b')(t));
      t.check(Math.abs(Date.parse(data.timestamp) - Date.now()) < 5 * 60_000, `the timestamp is about now (got ${data.timestamp})`);
      t.check(data.description === null && data.emoji === null, 'no description, no emoji');
    },
  },
  oneRequest(EVENTS, PUBLISH, '400 invalid_request', 'an empty event name and a tag key outside [a-z0-9-] are refused', (t) => ({
    method: 'POST',
    path: publishPath(t),
    token: apiToken(t),
    json: { event: '', tags: { 'Not A Key': 1 } },
  })),
  oneRequest(EVENTS, PUBLISH, '404 not_found', 'a feed the project does not have is 404', (t) => ({
    method: 'POST',
    path: `${feeds(t)}/no-such-feed/events`,
    token: apiToken(t),
    json: { event: 'Lost' },
  })),
  unsupportedMediaType(EVENTS, PUBLISH, publishPath, apiToken),
  payloadTooLarge(EVENTS, PUBLISH, publishPath, apiToken),
  unauthenticated(EVENTS, PUBLISH, publishPath, { json: { event: 'x' } }),
  {
    group: EVENTS,
    op: EVENT_LIST,
    expect: '200',
    title: 'events, newest first, filtered by feed and by tag',
    run: async (t) => {
      const [first, second] = t.state.events;
      t.need(second, 'two published events');
      const all = t.expect(
        await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}/events?feed=signups`, token: sessionOf('a')(t) }),
        200,
      );
      t.check(all.items[0]?.id === second!.id && all.items[1]?.id === first!.id, 'both events, newest first');
      newestFirst(
        t,
        all.items.map((e: { created_at: string }) => e),
        'events',
      );
      const tagged = t.expect(
        await t.send({
          method: 'GET',
          path: `/v1/projects/${ns(t)}/events?tag=${encodeURIComponent('plan:pro')}`,
          token: sessionOf('a')(t),
        }),
        200,
      );
      t.check(tagged.items.length === 1 && tagged.items[0].id === first!.id, 'tag=plan:pro finds the first event only');
      const other = t.expect(
        await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}/events?feed=general`, token: sessionOf('a')(t) }),
        200,
      );
      t.check(other.items.length === 0, 'feed=general holds none');
    },
  },
  badPageSize(EVENTS, EVENT_LIST, (t) => `/v1/projects/${ns(t)}/events`, sessionOf('a')),
  oneRequest(EVENTS, EVENT_LIST, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'GET',
    path: `/v1/projects/${ns(t, 'p2')}/events`,
    token: sessionOf('b')(t),
  })),
  unauthenticated(EVENTS, EVENT_LIST, (t) => `/v1/projects/${ns(t)}/events`),
  {
    group: EVENTS,
    op: STREAM,
    expect: '200',
    title: 'with Last-Event-ID the stream first replays the events published since that one',
    run: async (t) => {
      const [first, second] = t.state.events;
      t.need(second, 'two published events');
      const stream = await t.stream({
        method: 'GET',
        path: `/v1/projects/${ns(t)}/events/stream`,
        token: sessionOf('a')(t),
        headers: { 'Last-Event-ID': first!.id },
      });
      t.expect(stream, 200);
      const messages = await readEvents(stream, (m) => m.some((x) => x.event === 'event'), 5_000);
      const events = messages.filter((m) => m.event === 'event');
      t.check(
        events[0]?.id === second!.id,
        `the first message is the event after Last-Event-ID (got ${events.map((m) => m.id).join(', ') || 'nothing within 5 s'})`,
      );
      const payload = JSON.parse(events[0]!.data);
      const problems = t.contract.schemaProblems('Event', payload);
      t.check(problems.length === 0, `the message's data is an Event: ${problems.join('; ')}`);
      t.check(payload.id === second!.id, "the data's id is the message id");
    },
  },
  {
    group: EVENTS,
    op: STREAM,
    expect: '200',
    title: 'a member receives an event published while it listens',
    run: async (t) => {
      const stream = await t.stream({ method: 'GET', path: `/v1/projects/${ns(t)}/events/stream`, token: sessionOf('b')(t) });
      t.expect(stream, 200);
      const reading = readEvents(stream, (m) => m.some((x) => x.event === 'event'), 5_000);
      const published = await publish(t, 'Live signup');
      const events = (await reading).filter((m) => m.event === 'event');
      t.check(events[0]?.id === published.id, `the live event arrives (got ${events.map((m) => m.id).join(', ') || 'nothing within 5 s'})`);
      const problems = t.contract.schemaProblems('Event', JSON.parse(events[0]!.data));
      t.check(problems.length === 0, `the message's data is an Event: ${problems.join('; ')}`);
    },
  },
  {
    group: EVENTS,
    op: STREAM,
    expect: '400 invalid_request',
    title: 'a Last-Event-ID that is not an event id is refused',
    run: async (t) => {
      const stream = await t.stream({
        method: 'GET',
        path: `/v1/projects/${ns(t)}/events/stream`,
        token: sessionOf('a')(t),
        headers: { 'Last-Event-ID': 'not-a-uuid' },
      });
      stream.abort();
      t.expect(stream, 400, 'invalid_request');
    },
  },
  {
    group: EVENTS,
    op: STREAM,
    expect: '404 not_found',
    title: 'a non-member gets 404',
    run: async (t) => {
      const stream = await t.stream({ method: 'GET', path: `/v1/projects/${ns(t, 'p2')}/events/stream`, token: sessionOf('b')(t) });
      stream.abort();
      t.expect(stream, 404, 'not_found');
    },
  },
  {
    group: EVENTS,
    op: STREAM,
    expect: '401 unauthenticated',
    title: 'a token no one was given is refused, with a Bearer challenge',
    run: async (t) => {
      const stream = await t.stream({
        method: 'GET',
        path: `/v1/projects/${ns(t)}/events/stream`,
        token: `ses_${t.state.tag}-not-a-token`,
      });
      stream.abort();
      t.expect(stream, 401, 'unauthenticated');
    },
  },
  {
    group: EVENTS,
    op: BATCH,
    expect: '201',
    title: 'a batch of two events across two feeds is published with an API token, answered in the order sent',
    run: async (t) => {
      const before = t.state.events[t.state.events.length - 1];
      const events = [
        { feed: 'general', event: 'Batch one', tags: { run: t.state.tag } },
        { feed: 'signups', event: 'Batch two', emoji: '📦' },
      ];
      const data = t.expect(await t.send({ method: 'POST', path: batchPath(t), token: apiToken(t), json: { events } }), 201);
      const items = (data?.items ?? []) as { id: string; feed: string; event: string; emoji: string | null }[];
      t.check(
        items.length === 2 && items.every((item, i) => item.feed === events[i]!.feed && item.event === events[i]!.event),
        `both events, in the order sent (got ${JSON.stringify(items.map((e) => [e.feed, e.event]))})`,
      );
      t.check(items[1]?.emoji === '📦' && items[0]?.emoji === null, 'each with its own fields');
      t.check(items.length === 2 && items[0]!.id < items[1]!.id, 'ids increase in the order sent');
      if (before && items[0]) t.check(items[0].id > before.id, 'the first id is above the events published before');
      for (const item of items) t.state.events.push({ id: item.id, feed: item.feed });
    },
  },
  {
    group: EVENTS,
    op: BATCH,
    expect: '400 invalid_request',
    title: 'a bad second event refuses the whole batch, with details pointing into it (/body/events/1/…)',
    run: async (t) => {
      const exchange = await t.send({
        method: 'POST',
        path: batchPath(t),
        token: apiToken(t),
        json: {
          events: [
            { feed: 'signups', event: 'Fine' },
            { feed: 'signups', event: '' },
          ],
        },
      });
      t.expect(exchange, 400, 'invalid_request');
      expectDetails(t, exchange.json);
      const paths = ((exchange.json?.error?.details ?? []) as { path?: unknown }[]).map((d) => String(d.path));
      t.check(
        paths.length > 0 && paths.every((path) => path.startsWith('/body/events/1/')),
        `the details point into the second event (got ${paths.join(', ')})`,
      );
    },
  },
  oneRequest(EVENTS, BATCH, '404 not_found', 'an event naming a feed the project does not have refuses the batch with 404', (t) => ({
    method: 'POST',
    path: batchPath(t),
    token: apiToken(t),
    json: {
      events: [
        { feed: 'signups', event: 'Fine' },
        { feed: 'no-such-feed', event: 'Lost' },
      ],
    },
  })),
  oneRequest(EVENTS, BATCH, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'POST',
    path: `/v1/projects/${ns(t, 'p2')}/events`,
    token: sessionOf('b')(t),
    json: { events: [{ feed: 'general', event: 'Intrusion' }] },
  })),
  unsupportedMediaType(EVENTS, BATCH, batchPath, apiToken),
  payloadTooLarge(EVENTS, BATCH, batchPath, apiToken),
  unauthenticated(EVENTS, BATCH, batchPath, { json: { events: [{ feed: 'general', event: 'x' }] } }),
];
