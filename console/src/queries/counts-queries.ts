/**
 * A project's event counts over time in the query cache, for its charts: per feed, in the
 * reader's time zone.
 */
import { queryOptions } from '@tanstack/react-query';
import { refusedAt, sb, type Schemas } from '../api.ts';

type Interval = Schemas['CountInterval'];

/** The reader's time zone, which the buckets follow. */
export const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

export const countKeys = {
  chart: (namespace: string, interval: Interval) => ['counts', namespace, interval, zone] as const,
};

export const countsQuery = (namespace: string, interval: Interval) =>
  queryOptions({ queryKey: countKeys.chart(namespace, interval), queryFn: () => chartCounts(namespace, interval) });

/**
 * The counts per feed; or, when the service refuses so many counts in one answer (400 at
 * `/query/group_by`: buckets × feeds past its bound), all feeds together in one series.
 */
async function chartCounts(namespace: string, interval: Interval): Promise<Schemas['EventCounts']> {
  try {
    return await sb.events.counts(namespace, { interval, tz: zone, group_by: 'feed' });
  } catch (error) {
    if (!refusedAt(error, '/query/group_by')) throw error;
    return sb.events.counts(namespace, { interval, tz: zone });
  }
}
