/**
 * Who an event concerns and how to find it, on P1, after the feed cases: events published with
 * `user_id` and `notify` (single and batch), at timestamps in one past hour range of a day in 2001
 * picked from the run's tag, so nothing else on the deployment counts there; the events list
 * filtered by an end user, by whole words (`q`) and by two tags at once; counts over time for that
 * range (per hour, per hour of a zone a quarter hour off UTC, per feed) and the ranges refused
 * with 400; end users identified (properties merged, at most 50) and read back with their first
 * and last event. The events carry a tag `queries:<run>` of their own, so the filters are checked
 * against exactly the events this file published.
 *
 * The end user `conformance` is identified here without events: it is the one the conditional read
 * of `GET …/users/{user_id}` (checks/conditional.ts, via `concretePath`) asks for.
 */
import { createHash } from 'node:crypto';
import type { CaseContext, CaseDef } from '../case.js';
import type { Exchange } from '../http.js';
import { expectDetails, ns, oneRequest, payloadTooLarge, sessionOf, unauthenticated, unsupportedMediaType } from './common.js';

const EVENTS = 'events';
const END_USERS = 'end users';
const PUBLISH = 'POST /v1/projects/{namespace}/feeds/{feed}/events';
const BATCH = 'POST /v1/projects/{namespace}/events';
const EVENT_LIST = 'GET /v1/projects/{namespace}/events';
const COUNTS = 'GET /v1/projects/{namespace}/events/counts';
const IDENTIFY = 'PUT /v1/projects/{namespace}/users/{user_id}';
const END_USER = 'GET /v1/projects/{namespace}/users/{user_id}';

const HOUR = 3_600_000;
const apiToken = (t: CaseContext) => t.need(t.state.apiToken, 'an API token').token;
const eventsPath = (t: CaseContext, which: 'p1' | 'p2' = 'p1') => `/v1/projects/${ns(t, which)}/events`;
const endUserPath = (t: CaseContext, userId: string, which: 'p1' | 'p2' = 'p1') =>
  `/v1/projects/${ns(t, which)}/users/${encodeURIComponent(userId)}`;

/** The run's two end users, named by its tag. */
const u1 = (t: CaseContext) => `${t.state.tag}-u1`;
const u2 = (t: CaseContext) => `${t.state.tag}-u2`;
/** Identified without events; the conditional read of getEndUser reads it (concretePath's user_id). */
const FRESH_USER = 'conformance';

/** 00:00 UTC of a day of 2001 picked from the run's tag: the events published here fall on it, from 09:05 to 11:00. */
function day(t: CaseContext): number {
  const pick = createHash('sha256').update(t.state.tag).digest().readUInt32BE(0) % 365;
  return Date.UTC(2001, 0, 1) + pick * 24 * HOUR;
}
const at = (t: CaseContext, hours: number, minutes = 0, ms = 0) => new Date(day(t) + hours * HOUR + minutes * 60_000 + ms).toISOString();

/**
 * What this file publishes, in this order (so the newest first is the reverse): one by one, then
 * as a batch of three. Every one carries `queries:<run>`.
 */
interface Published {
  event: string;
  description?: string;
  user_id?: string;
  notify?: boolean;
  tags: Record<string, string | number>;
  timestamp: string;
}

function published(t: CaseContext): { single: Published; batch: (Published & { feed: string })[] } {
  const tags = (more: Record<string, string | number>) => ({ queries: t.state.tag, ...more });
  return {
    single: {
      event: 'Refund issued',
      description: 'Grace asked for a REFUND.',
      user_id: u1(t),
      notify: true,
      tags: tags({ plan: 'pro' }),
      timestamp: at(t, 9, 5),
    },
    batch: [
      {
        feed: 'general',
        event: 'Payment failed',
        description: 'Card declined; refunded nothing',
        user_id: u1(t),
        tags: tags({ plan: 'pro', seats: 5 }),
        timestamp: at(t, 9, 30),
      },
      {
        feed: 'general',
        event: 'Upgraded',
        user_id: u2(t),
        notify: true,
        tags: tags({ plan: 'team', seats: 5 }),
        timestamp: at(t, 10, 59, 59_999),
      },
      { feed: 'signups', event: 'Refund requested', tags: tags({ plan: 'pro', seats: 5 }), timestamp: at(t, 11) },
    ],
  };
}

/** The `event` names of a list's page, after a 200. */
async function titles(t: CaseContext, query: [string, string][]): Promise<string[]> {
  const path = `${eventsPath(t)}?${new URLSearchParams(query).toString()}`;
  const data = t.expect(await t.send({ method: 'GET', path, token: sessionOf('a')(t) }), 200);
  return (data.items as { event: string }[]).map((e) => e.event);
}

/** JSON with every object's keys sorted: objects compare equal whatever order the deployment keeps their keys in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );

function same(t: CaseContext, got: unknown, want: unknown, what: string): void {
  t.check(canonical(got) === canonical(want), `${what}: expected ${canonical(want)}, got ${canonical(got)}`);
}

/** A series' buckets as [start in ms, count] pairs, comparable whatever the deployment's precision of `start`. */
const buckets = (series: { buckets: { start: string; count: number }[] } | undefined) =>
  (series?.buckets ?? []).map((b) => [Date.parse(b.start), b.count]);

function counts(t: CaseContext, query: Record<string, string>, token = sessionOf('a')(t)): Promise<Exchange> {
  return t.send({ method: 'GET', path: `${eventsPath(t)}/counts?${new URLSearchParams(query).toString()}`, token });
}

/** A 400 `invalid_request` whose details point at `pointer`. */
function refusedAt(t: CaseContext, exchange: Exchange, pointer: string): void {
  t.expect(exchange, 400, 'invalid_request');
  expectDetails(t, exchange.json);
  const paths = ((exchange.json?.error?.details ?? []) as { path?: unknown }[]).map((d) => String(d.path));
  t.check(paths.includes(pointer), `the details point at ${pointer} (got ${paths.join(', ')})`, exchange);
}

function endUser(
  t: CaseContext,
  data: any,
  want: { user_id: string; properties: object; first: string | null; last: string | null; n: number },
) {
  same(t, data?.user_id, want.user_id, 'user_id');
  same(t, data?.properties, want.properties, `the properties of ${want.user_id}`);
  const time = (value: unknown) => (typeof value === 'string' && !Number.isNaN(Date.parse(value)) ? Date.parse(value) : value);
  same(
    t,
    [time(data?.first_seen), time(data?.last_seen)],
    [time(want.first), time(want.last)],
    `first_seen and last_seen of ${want.user_id}`,
  );
  same(t, data?.event_count, want.n, `event_count of ${want.user_id}`);
}

export const eventQueryCases: CaseDef[] = [
  {
    group: EVENTS,
    op: PUBLISH,
    expect: '201',
    title: 'an event published with user_id and notify shows them',
    run: async (t) => {
      const body = published(t).single;
      const data = t.expect(
        await t.send({ method: 'POST', path: `/v1/projects/${ns(t)}/feeds/signups/events`, token: apiToken(t), json: body }),
        201,
      );
      t.state.events.push({ id: data.id, feed: data.feed });
      same(t, [data.user_id, data.notify], [body.user_id, true], 'user_id and notify');
      t.check(Date.parse(data.timestamp) === Date.parse(body.timestamp), `the timestamp given (got ${data.timestamp})`);
    },
  },
  {
    group: EVENTS,
    op: BATCH,
    expect: '201',
    title: 'a batch shows each event’s user_id and notify, null and false when not sent',
    run: async (t) => {
      const events = published(t).batch;
      const data = t.expect(await t.send({ method: 'POST', path: eventsPath(t), token: apiToken(t), json: { events } }), 201);
      const items = (data?.items ?? []) as { id: string; feed: string; user_id: unknown; notify: unknown }[];
      same(
        t,
        items.map((e) => [e.user_id, e.notify]),
        events.map((e) => [e.user_id ?? null, e.notify ?? false]),
        'user_id and notify of each',
      );
      for (const item of items) t.state.events.push({ id: item.id, feed: item.feed });
    },
  },
  {
    group: EVENTS,
    op: EVENT_LIST,
    expect: '200',
    title: 'user_id= lists one end user’s journey, newest first, and nobody else’s events',
    run: async (t) => {
      same(t, await titles(t, [['user_id', u1(t)]]), ['Payment failed', 'Refund issued'], `user_id=${u1(t)}`);
    },
  },
  {
    group: EVENTS,
    op: EVENT_LIST,
    expect: '200',
    title: 'q= finds whole words in event and description, case-insensitive, every word required',
    run: async (t) => {
      const run: [string, string] = ['tag', `queries:${t.state.tag}`];
      // "refunded" is another word than "refund".
      same(t, await titles(t, [['q', 'refund'], run]), ['Refund requested', 'Refund issued'], 'q=refund');
      same(t, await titles(t, [['q', 'REFUND grace'], run]), ['Refund issued'], 'q=REFUND grace');
    },
  },
  {
    group: EVENTS,
    op: EVENT_LIST,
    expect: '200',
    title: 'two tag= filters find only the events carrying both',
    run: async (t) => {
      const found = await titles(t, [
        ['tag', `queries:${t.state.tag}`],
        ['tag', 'plan:pro'],
      ]);
      same(t, found, ['Refund requested', 'Payment failed', 'Refund issued'], `tag=queries:${t.state.tag}&tag=plan:pro`);
    },
  },
  {
    group: EVENTS,
    op: COUNTS,
    expect: '200',
    title: 'hourly counts of a past range are exact, the empty hours as 0',
    run: async (t) => {
      const data = t.expect(await counts(t, { interval: 'hour', from: at(t, 8, 30), to: at(t, 11, 10) }), 200);
      same(
        t,
        [data.interval, data.tz, data.series?.length, data.series?.[0]?.feed],
        ['hour', 'UTC', 1, null],
        'interval, tz, one series for every feed',
      );
      same(
        t,
        buckets(data.series?.[0]),
        [
          [day(t) + 8 * HOUR, 0],
          [day(t) + 9 * HOUR, 2],
          [day(t) + 10 * HOUR, 1],
          [day(t) + 11 * HOUR, 1],
        ],
        'the buckets',
      );
    },
  },
  {
    group: EVENTS,
    op: COUNTS,
    expect: '200',
    title: 'hours are cut where the zone puts them: Asia/Kathmandu (UTC+05:45)',
    run: async (t) => {
      const data = t.expect(await counts(t, { tz: 'Asia/Kathmandu', from: at(t, 9), to: at(t, 11, 10) }), 200);
      same(t, data.tz, 'Asia/Kathmandu', 'the zone');
      const quarter = 15 * 60_000;
      same(
        t,
        buckets(data.series?.[0]),
        [
          [day(t) + 8 * HOUR + quarter, 1],
          [day(t) + 9 * HOUR + quarter, 1],
          [day(t) + 10 * HOUR + quarter, 2],
        ],
        'the buckets',
      );
    },
  },
  {
    group: EVENTS,
    op: COUNTS,
    expect: '200',
    title: 'group_by=feed answers one series per feed, by name; feed= counts one',
    run: async (t) => {
      const range = { from: at(t, 9), to: at(t, 11) };
      const grouped = t.expect(await counts(t, { ...range, group_by: 'feed' }), 200);
      const series = (grouped.series ?? []) as { feed: string }[];
      same(
        t,
        series.map((s) => s.feed),
        ['general', 'signups'],
        'the feeds',
      );
      const hours = [9, 10, 11].map((h) => day(t) + h * HOUR);
      same(
        t,
        buckets(grouped.series?.[0]),
        [
          [hours[0], 1],
          [hours[1], 1],
          [hours[2], 0],
        ],
        'general',
      );
      same(
        t,
        buckets(grouped.series?.[1]),
        [
          [hours[0], 1],
          [hours[1], 0],
          [hours[2], 1],
        ],
        'signups',
      );
      const one = t.expect(await counts(t, { ...range, feed: 'signups' }), 200);
      same(
        t,
        one.series?.map((s: { feed: unknown }) => s.feed),
        [null],
        'feed=signups: one series',
      );
      same(t, buckets(one.series?.[0]), buckets(grouped.series?.[1]), 'feed=signups counts that feed');
    },
  },
  {
    group: EVENTS,
    op: COUNTS,
    expect: '400 invalid_request',
    title: 'a range of more than 1,500 buckets is refused (1,501 minutes)',
    run: async (t) => {
      refusedAt(t, await counts(t, { interval: 'minute', from: at(t, 0), to: at(t, 25) }), '/query/from');
    },
  },
  {
    group: EVENTS,
    op: COUNTS,
    expect: '400 invalid_request',
    title: '`from` after `to` is refused',
    run: async (t) => {
      refusedAt(t, await counts(t, { from: at(t, 12), to: at(t, 11) }), '/query/from');
    },
  },
  {
    group: EVENTS,
    op: COUNTS,
    expect: '400 invalid_request',
    title: 'a time zone that is no IANA zone is refused',
    run: async (t) => {
      refusedAt(t, await counts(t, { tz: 'Mars/Olympus_Mons' }), '/query/tz');
    },
  },
  oneRequest(EVENTS, COUNTS, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'GET',
    path: `${eventsPath(t, 'p2')}/counts`,
    token: sessionOf('b')(t),
  })),
  unauthenticated(EVENTS, COUNTS, (t) => `${eventsPath(t)}/counts`),
  {
    group: END_USERS,
    op: IDENTIFY,
    expect: '200',
    title: 'identify merges properties (a key sent replaces its value, the others stay) and shows the end user’s events',
    run: async (t) => {
      const path = endUserPath(t, u2(t));
      t.expect(
        await t.send({ method: 'PUT', path, token: apiToken(t), json: { properties: { name: 'Grace', plan: 'pro', seats: 5 } } }),
        200,
      );
      const data = t.expect(
        await t.send({ method: 'PUT', path, token: apiToken(t), json: { properties: { plan: 'team', admin: true } } }),
        200,
      );
      const upgraded = at(t, 10, 59, 59_999);
      endUser(t, data, {
        user_id: u2(t),
        properties: { name: 'Grace', plan: 'team', seats: 5, admin: true },
        first: upgraded,
        last: upgraded,
        n: 1,
      });
    },
  },
  {
    group: END_USERS,
    op: IDENTIFY,
    expect: '200',
    title: 'an end user without events can be identified: no first or last event, count 0',
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'PUT', path: endUserPath(t, FRESH_USER), token: apiToken(t), json: { properties: { plan: 'free' } } }),
        200,
      );
      endUser(t, data, { user_id: FRESH_USER, properties: { plan: 'free' }, first: null, last: null, n: 0 });
    },
  },
  {
    group: END_USERS,
    op: IDENTIFY,
    expect: '400 invalid_request',
    title: 'more than 50 properties are refused, and nothing changes',
    run: async (t) => {
      const path = endUserPath(t, FRESH_USER);
      const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i]));
      refusedAt(t, await t.send({ method: 'PUT', path, token: apiToken(t), json: { properties: many } }), '/body/properties');
      const data = t.expect(await t.send({ method: 'GET', path, token: sessionOf('a')(t) }), 200);
      same(t, data?.properties, { plan: 'free' }, 'the properties after the refusal');
    },
  },
  oneRequest(END_USERS, IDENTIFY, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'PUT',
    path: endUserPath(t, u1(t), 'p2'),
    token: sessionOf('b')(t),
    json: { properties: { plan: 'pro' } },
  })),
  unsupportedMediaType(END_USERS, IDENTIFY, (t) => endUserPath(t, u1(t)), apiToken),
  payloadTooLarge(END_USERS, IDENTIFY, (t) => endUserPath(t, u1(t)), apiToken),
  unauthenticated(END_USERS, IDENTIFY, (t) => endUserPath(t, u1(t)), { json: { properties: {} } }),
  {
    group: END_USERS,
    op: END_USER,
    expect: '200',
    title: 'a member reads an end user seen only in events: no properties, first and last event, count',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: endUserPath(t, u1(t)), token: sessionOf('b')(t) }), 200);
      endUser(t, data, { user_id: u1(t), properties: {}, first: at(t, 9, 5), last: at(t, 9, 30), n: 2 });
    },
  },
  {
    group: END_USERS,
    op: END_USER,
    expect: '200',
    title: 'the identified end user reads back as identify answered it',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: endUserPath(t, u2(t)), token: sessionOf('a')(t) }), 200);
      const upgraded = at(t, 10, 59, 59_999);
      endUser(t, data, {
        user_id: u2(t),
        properties: { name: 'Grace', plan: 'team', seats: 5, admin: true },
        first: upgraded,
        last: upgraded,
        n: 1,
      });
    },
  },
  oneRequest(END_USERS, END_USER, '404 not_found', 'an end user neither identified nor named by an event is 404', (t) => ({
    method: 'GET',
    path: endUserPath(t, `${t.state.tag}-nobody`),
    token: sessionOf('a')(t),
  })),
  oneRequest(END_USERS, END_USER, '404 not_found', 'a non-member gets 404', (t) => ({
    method: 'GET',
    path: endUserPath(t, u1(t), 'p2'),
    token: sessionOf('b')(t),
  })),
  oneRequest(END_USERS, END_USER, '400 invalid_request', 'a user_id over 160 characters is refused', (t) => ({
    method: 'GET',
    path: endUserPath(t, 'u'.repeat(161)),
    token: sessionOf('a')(t),
  })),
  unauthenticated(END_USERS, END_USER, (t) => endUserPath(t, u1(t))),
];
