/**
 * The feed's filters, and the test a live event must pass to join a filtered list: the service's
 * own rules for `GET …/events` (one feed, one end user, every `key:value` tag, every word of `q` as a
 * whole word, case-insensitive), so that the live events shown are those a reload would list.
 * tests/console/live-filter.test.ts holds it to the service's answers.
 */

/** The list's filters, as the URL holds them. */
export interface Filters {
  feed?: string | undefined;
  tag: string[];
  user_id?: string | undefined;
  q?: string | undefined;
}

/** What the filters read of an event (an Event of the contract has these fields). */
export interface Filterable {
  feed: string;
  event: string;
  description: string | null;
  tags: Record<string, string | number | boolean>;
  user_id: string | null;
}

/** A word: letters and digits; anything else separates words. */
const WORD = /[\p{L}\p{N}]+/gu;

/** Whether an event passes the filters as the service would judge it. */
export function matches(event: Filterable, filters: Filters): boolean {
  if (filters.feed && event.feed !== filters.feed) return false;
  if (filters.user_id && event.user_id !== filters.user_id) return false;
  for (const filter of filters.tag) {
    const colon = filter.indexOf(':');
    if (colon < 0) return false;
    const value = event.tags[filter.slice(0, colon)];
    if (value === undefined || String(value) !== filter.slice(colon + 1)) return false;
  }
  if (filters.q) {
    const words = filters.q.toLowerCase().match(WORD);
    if (!words) return false;
    const text = new Set(`${event.event} ${event.description ?? ''}`.toLowerCase().match(WORD) ?? []);
    if (!words.every((word) => text.has(word))) return false;
  }
  return true;
}
