/**
 * Caps on the collections a user can grow (config.ts `limits`). Each is counted inside the creating
 * transaction with the collection's parent row locked (transaction.ts), so of any number of
 * concurrent creates at the cap exactly the ones that fit succeed.
 */
import type { Config } from '../config.js';
import { LimitReached } from '../errors.js';

export type Limits = Config['limits'];

/** Streams are refused by the live stream itself; sessions past the cap end the oldest, never refuse a login. */
type Cap = Exclude<keyof Limits, 'streamsPerUser' | 'sessionsPerUser'>;

/** The setting each cap is read from, named in the refusal. */
const SETTINGS: Record<Cap, string> = {
  feedsPerProject: 'MAX_FEEDS_PER_PROJECT',
  insightsPerProject: 'MAX_INSIGHTS_PER_PROJECT',
  membersPerProject: 'MAX_MEMBERS_PER_PROJECT',
  projectsPerUser: 'MAX_PROJECTS_PER_USER',
  apiTokensPerUser: 'MAX_API_TOKENS_PER_USER',
  webhooksPerProject: 'MAX_WEBHOOKS_PER_PROJECT',
};

/**
 * 409 `limit_reached` when `count` (what exists now) leaves no room for one more; `what` says what
 * was counted, e.g. `This project has ${count} feeds`.
 */
export function refuseAtCap(limits: Limits, cap: Cap, count: number, what: string): void {
  const value = limits[cap];
  if (count >= value) throw new LimitReached(what, { setting: SETTINGS[cap], value });
}
