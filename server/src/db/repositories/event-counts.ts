/**
 * Counts of a project's events over time, read from `event_counts` (written with the events by
 * db/repositories/events.ts): minute rows answer minute buckets, quarter-hour rows hour and day
 * buckets in any time zone. A chart reads at most a few thousand rows per feed, however many
 * events there are.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query, sqlOnce } from '../raw.js';

export type CountInterval = 'minute' | 'hour' | 'day';

/** The rollup rows each interval sums: minutes for minute buckets, quarter hours for the others. */
const SPAN: Record<CountInterval, number> = { minute: 60, hour: 900, day: 900 };

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

/** The events stored per feed and bucket in the range, buckets named by their start; buckets without events are absent. */
export async function countsPerFeed(em: EntityManager, q: CountsQuery): Promise<{ feedId: string; start: Date; count: number }[]> {
  const sql = sqlOnce(
    `event-counts:${q.feedId === undefined ? '' : 'feed'}`,
    () =>
      "select c.feed_id, to_json(date_trunc(?, c.start, ?)) #>> '{}' as start, sum(c.count)::float8 as count from event_counts c " +
      'where c.project_id = ? and c.span = ? and c.start >= ? and c.start < ?' +
      (q.feedId === undefined ? '' : ' and c.feed_id = ?') +
      ' group by 1, 2',
  );
  const params: unknown[] = [q.interval, q.zone, q.projectId, SPAN[q.interval], q.from.toISOString(), q.until.toISOString()];
  if (q.feedId !== undefined) params.push(q.feedId);
  const rows = await query<{ feed_id: string; start: string; count: number }>(em, sql, params);
  return rows.map((row) => ({ feedId: row.feed_id, start: new Date(row.start), count: row.count }));
}
