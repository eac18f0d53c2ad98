/**
 * The shared side of the per-instance request counts (http/rate-counter.ts): each instance adds
 * what it counted since its last batch, and learns every instance's total, in one statement.
 *
 * Rows live in `rate_limits`, the table the sign-in limits' store (rate-limiter-flexible) also
 * keeps, in its layout and meaning: `key` (`<limit>:<caller>`), `points` (the count in the current
 * window) and `expire` (the window's end, ms since the epoch), so that its clean-up and ours both
 * drop rows whose window has passed.
 */
import type { Database } from './orm.js';
import { query } from './raw.js';

export interface CountDelta {
  key: string;
  add: number;
}

/** A caller's count across every instance, and when its window ends (ms since the epoch). */
export interface CountTotal {
  points: number;
  expire: number;
}

/**
 * Adds each delta to its row and answers every row's new total and window end. A row whose window
 * has ended starts again with the delta, for `windowMs` from now; the database's clock judges both,
 * so instances whose clocks differ still share one window. Keys are written in sorted order, so
 * that two instances' batches never wait on each other in a circle.
 */
export async function addRateCounts(db: Pick<Database, 'orm'>, deltas: CountDelta[], windowMs: number): Promise<Map<string, CountTotal>> {
  const sorted = [...deltas].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const rows = await query<{ key: string; points: number; expire: string }>(
    db.orm.em.fork(),
    `with now as (select (extract(epoch from clock_timestamp()) * 1000)::bigint as ms)
     insert into rate_limits as r (key, points, expire)
     select key, points, now.ms + ? from unnest(?::varchar[], ?::int[]) as t(key, points), now
     on conflict (key) do update set
       points = case when r.expire <= excluded.expire - ? then excluded.points else r.points + excluded.points end,
       expire = case when r.expire <= excluded.expire - ? then excluded.expire else r.expire end
     returning key, points, expire`,
    [windowMs, sorted.map((d) => d.key), sorted.map((d) => d.add), windowMs, windowMs],
  );
  return new Map(rows.map((row) => [row.key, { points: row.points, expire: Number(row.expire) }]));
}

/** Drops the rows whose window ended more than a window ago, by the database's clock. */
export async function dropEndedRateCounts(db: Pick<Database, 'orm'>, windowMs: number): Promise<void> {
  await query(db.orm.em.fork(), 'delete from rate_limits where expire < (extract(epoch from clock_timestamp()) * 1000)::bigint - ?', [
    windowMs,
  ]);
}
