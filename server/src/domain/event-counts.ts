/** Events over time (`GET …/events/counts`): buckets cut in a time zone, summed from the rollups kept with the events. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { operations } from '../../../spec/generated/openapi.js';
import type { Project } from '../db/entities.js';
import { bucketsBetween, countsPerFeed, isKnownZone, type CountInterval } from '../db/repositories/event-counts-rows.js';
import { feedsOf } from '../db/repositories/events-rows.js';
import { InvalidRequest } from '../errors.js';

export type CountsRequest = NonNullable<operations['countEvents']['parameters']['query']>;

export interface CountSeries {
  feed: string | null;
  buckets: { start: Date; count: number }[];
}

export interface EventCounts {
  interval: CountInterval;
  tz: string;
  series: CountSeries[];
}

/** More buckets would make an answer (and a chart) larger than anyone reads. */
export const MAX_BUCKETS = 1_500;

/**
 * Buckets in all the series of one answer (buckets × series): about 46 bytes of JSON each, so an
 * answer stays under a MiB however many feeds `group_by=feed` spreads it over.
 */
export const MAX_COUNTS = 20_000;

const HOUR_MS = 60 * 60_000;
/** The range when `from` is not given: a day of minutes or hours, a month of days. */
const DEFAULT_RANGE_MS: Record<CountInterval, number> = { minute: 24 * HOUR_MS, hour: 24 * HOUR_MS, day: 30 * 24 * HOUR_MS };

/**
 * The longest a bucket can be: a minute and an hour are fixed lengths of time; a day is 23 to 25
 * hours where clocks change, and the time zone database holds older days of up to 48 (a zone that
 * moved its date line back), so 48 it is.
 */
const LONGEST_BUCKET_MS: Record<CountInterval, number> = { minute: 60_000, hour: HOUR_MS, day: 48 * HOUR_MS };

/**
 * Refuses, before any statement, a range that holds more than MAX_BUCKETS buckets for certain.
 * Buckets are consecutive and the first starts at or before `from`, so n buckets span more than
 * `to - from`, and n > (to - from) / longest. What passes makes at most about twice MAX_BUCKETS
 * (days of 23 hours against the 48 assumed), which the database then cuts exactly, cheaply: a
 * series of bucket starts is made whole before any LIMIT applies to it.
 */
function refuseHugeRange(interval: CountInterval, from: Date, to: Date): void {
  if (Math.floor((to.getTime() - from.getTime()) / LONGEST_BUCKET_MS[interval]) + 1 > MAX_BUCKETS) throw tooManyBuckets(interval);
}

const tooManyBuckets = (interval: CountInterval) =>
  InvalidRequest.field('/query/from', `makes more than ${MAX_BUCKETS.toLocaleString('en')} buckets of a ${interval} up to \`to\``);

/** The project's events counted per bucket, as `GET …/events/counts` answers them. */
export async function eventCounts(em: EntityManager, project: Project, request: CountsRequest): Promise<EventCounts> {
  const interval = request.interval ?? 'hour';
  const zone = request.tz ?? 'UTC';
  const to = request.to === undefined ? new Date() : new Date(request.to);
  const from = request.from === undefined ? new Date(to.getTime() - DEFAULT_RANGE_MS[interval]) : new Date(request.from);
  if (from > to) throw InvalidRequest.field('/query/from', 'must not be after `to`');
  refuseHugeRange(interval, from, to);
  if (!(await isKnownZone(em, zone))) throw InvalidRequest.field('/query/tz', 'must be an IANA time zone name, such as Europe/Berlin');
  const buckets = await bucketsBetween(em, interval, zone, from, to, MAX_BUCKETS + 1);
  if (buckets.length > MAX_BUCKETS) throw tooManyBuckets(interval);

  const feeds = (await feedsOf(em, project.id)).filter((feed) => request.feed === undefined || feed.name === request.feed);
  const byFeed = request.group_by === 'feed';
  if (byFeed && buckets.length * feeds.length > MAX_COUNTS) {
    throw InvalidRequest.field(
      '/query/group_by',
      `would answer ${buckets.length.toLocaleString('en')} buckets for each of ${feeds.length} feeds, more than ` +
        `${MAX_COUNTS.toLocaleString('en')} counts in all: ask for a shorter range, a longer interval or one feed`,
    );
  }
  const series = new Map<string | null, Map<number, number>>(byFeed ? feeds.map((feed) => [feed.id, new Map()]) : [[null, new Map()]]);
  if (feeds.length > 0) {
    const span = { from: buckets[0]!.start, until: buckets[buckets.length - 1]!.next };
    const feedId = request.feed === undefined ? undefined : feeds[0]!.id;
    for (const row of await countsPerFeed(em, { projectId: project.id, interval, zone, ...span, feedId })) {
      const counts = series.get(byFeed ? row.feedId : null);
      const start = row.start.getTime();
      counts?.set(start, (counts.get(start) ?? 0) + row.count);
    }
  }
  const names = new Map(feeds.map((feed) => [feed.id, feed.name]));
  return {
    interval,
    tz: zone,
    series: [...series].map(([feedId, counts]) => ({
      feed: feedId === null ? null : names.get(feedId)!,
      buckets: buckets.map(({ start }) => ({ start, count: counts.get(start.getTime()) ?? 0 })),
    })),
  };
}
