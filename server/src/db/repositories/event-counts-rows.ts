/**
 * Counts of a project's events over time, read from `event_counts` (written with the events by
 * db/repositories/events-rows.ts, per minute, quarter hour, hour and UTC day): minute rows answer minute
 * buckets; hour and day buckets sum the longest rows that fit them in their time zone
 * (`countsPerFeed`). Per feed and bucket a chart reads one row in UTC; in another zone on whole
 * hours one per hour bucket and 24 per day bucket; in a zone a half or three-quarter hour off, 4 per
 * hour and 96 per day bucket: however many events there are.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query, sqlOnce } from '../raw.js';

export type CountInterval = 'minute' | 'hour' | 'day';

const HOUR_MS = 60 * 60_000;

let zones: Promise<Set<string>> | undefined;

/** Whether the database knows the time zone `name` (its list is read once per process). */
export async function isKnownZone(em: EntityManager, name: string): Promise<boolean> {
  zones ??= query<{ name: string }>(em, 'select name from pg_timezone_names', [])
    .then((rows) => new Set(rows.map((row) => row.name)))
    .catch((error: unknown) => {
      zones = undefined;
      throw error;
    });
  return (await zones).has(name);
}

// Minutes and hours are fixed lengths of time; a day is from one local midnight to the next, 23 to
// 25 hours where the clocks change, so its series is made in the zone's wall-clock time and each
// midnight turned back into an instant (as date_trunc(…, zone) does with the counts' starts).
const BUCKETS: Record<CountInterval, string> = {
  minute:
    "select to_json(b) #>> '{}' as start, to_json(b + interval '1 minute') #>> '{}' as next " +
    "from generate_series(date_trunc('minute', ?::timestamptz, ?), ?::timestamptz, interval '1 minute') b limit ?",
  hour:
    "select to_json(b) #>> '{}' as start, to_json(b + interval '1 hour') #>> '{}' as next " +
    "from generate_series(date_trunc('hour', ?::timestamptz, ?), ?::timestamptz, interval '1 hour') b limit ?",
  day:
    "select to_json(d at time zone z.tz) #>> '{}' as start, to_json((d + interval '1 day') at time zone z.tz) #>> '{}' as next " +
    "from (select ?::text as tz) z, generate_series(date_trunc('day', ?::timestamptz at time zone z.tz), ?::timestamptz at time zone z.tz, interval '1 day') d limit ?",
};

/**
 * The buckets from the one holding `from` to the one holding `to`, each with the start of the one
 * after it; at most `max` of them, so a caller asking for `max + 1` learns whether there are more.
 */
export async function bucketsBetween(
  em: EntityManager,
  interval: CountInterval,
  zone: string,
  from: Date,
  to: Date,
  max: number,
): Promise<{ start: Date; next: Date }[]> {
  const params = interval === 'day' ? [zone, from.toISOString(), to.toISOString(), max] : [from.toISOString(), zone, to.toISOString(), max];
  const rows = await query<{ start: string; next: string }>(em, BUCKETS[interval], params);
  return rows.map((row) => ({ start: new Date(row.start), next: new Date(row.next) }));
}

export interface CountsQuery {
  projectId: string;
  interval: CountInterval;
  zone: string;
  /** The first bucket's start, and the end of the last bucket. */
  from: Date;
  until: Date;
  /** Only this feed's counts. */
  feedId?: string | undefined;
}

// Which rows a bucket sums. A row of `span` seconds starts at a multiple of it, so it lies within
// one bucket when every boundary of the range's buckets is a multiple of its span too: minute
// buckets sum minute rows; hour buckets hours when they start on a whole hour of UTC (any zone but
// those a half or three-quarter hour off), else quarter hours; day buckets days when every midnight
// from the first to the last falls on one of UTC, else hours when every one falls on a whole hour,
// else quarter hours. The midnights are the day series of BUCKETS.day.
const DAY_SPAN =
  '(select case when bool_and(mod(extract(epoch from m.at), 86400) = 0) then 86400 ' +
  'when bool_and(mod(extract(epoch from m.at), 3600) = 0) then 3600 else 900 end ' +
  "from (select d at time zone z.tz as at from (select ?::text as tz) z, generate_series(?::timestamptz at time zone z.tz, ?::timestamptz at time zone z.tz, interval '1 day') d) m)";

/** Rows as long as the buckets, each its own bucket (`direct`); or rows summed into buckets cut in the zone. */
type CountsShape = 'direct' | 'summed' | 'days';

function countsSql(shape: CountsShape, feed: boolean): string {
  const where =
    `where c.project_id = ? and c.span = ${shape === 'days' ? DAY_SPAN : '?'} and c.start >= ? and c.start < ?` +
    (feed ? ' and c.feed_id = ?' : '');
  // A row per feed, its buckets' starts (epoch seconds) and counts as two arrays: a row per feed
  // and bucket cost more in the driver than in the statement (a week of hours of 5 feeds is 845).
  return shape === 'direct'
    ? 'select c.feed_id, array_agg(extract(epoch from c.start)::float8) as starts, array_agg(c.count::float8) as counts ' +
        `from event_counts c ${where} group by 1`
    : 'select t.feed_id, array_agg(extract(epoch from t.bucket)::float8) as starts, array_agg(t.count::float8) as counts from (' +
        `select c.feed_id, date_trunc(?, c.start, ?) as bucket, sum(c.count) as count from event_counts c ${where} group by 1, 2) t group by 1`;
}

/** The events stored per feed and bucket in the range, buckets named by their start; buckets without events are absent. */
export async function countsPerFeed(em: EntityManager, q: CountsQuery): Promise<{ feedId: string; start: Date; count: number }[]> {
  const from = q.from.toISOString();
  const until = q.until.toISOString();
  const on = (ms: number) => q.from.getTime() % ms === 0 && q.until.getTime() % ms === 0;
  let shape: CountsShape;
  let span: number | undefined;
  if (q.interval === 'day') shape = 'days';
  else if (q.interval === 'minute') [shape, span] = [on(60_000) ? 'direct' : 'summed', 60];
  else [shape, span] = on(HOUR_MS) ? ['direct', 3600] : ['summed', 900];
  const sql = sqlOnce(`event-counts:${shape}:${q.feedId === undefined ? '' : 'feed'}`, () => countsSql(shape, q.feedId !== undefined));
  const params: unknown[] = [
    ...(shape === 'direct' ? [] : [q.interval, q.zone]),
    q.projectId,
    ...(shape === 'days' ? [q.zone, from, until] : [span]),
    from,
    until,
  ];
  if (q.feedId !== undefined) params.push(q.feedId);
  const rows = await query<{ feed_id: string; starts: number[]; counts: number[] }>(em, sql, params);
  return rows.flatMap((row) =>
    row.starts.map((start, i) => ({ feedId: row.feed_id, start: new Date(start * 1000), count: row.counts[i]! })),
  );
}
