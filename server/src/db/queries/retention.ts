/**
 * The statements of pruning what the service stops keeping: pruning's advisory lock, held by one
 * instance at a time on a connection of its own, and the batches it deletes (Stripe event ids,
 * events; icons are in icons.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { query } from '../raw.js';

/** The advisory lock (class, key) of pruning; the class differs from every other lock's of this service. */
const PRUNE_LOCK = [0x5b1f, 1] as const;

/**
 * Takes pruning's session advisory lock on a connection of its own, and answers its release (which
 * ends that session); undefined when another session holds it. A lost connection also releases the
 * lock, which at worst lets another run overlap.
 */
export async function tryPruneLock(databaseUrl: string, connectTimeoutMs: number): Promise<(() => Promise<void>) | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: connectTimeoutMs });
  // A lost connection surfaces as an event; unlistened, it would end the process.
  client.on('error', () => undefined);
  const end = () => client.end().catch(() => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ locked: boolean }>('select pg_try_advisory_lock($1, $2) as locked', [...PRUNE_LOCK]);
    if (rows[0]?.locked) return end;
  } catch (error) {
    await end();
    throw error;
  }
  await end();
  return undefined;
}

const DELETE_STRIPE_EVENTS = `with gone as (
    delete from stripe_events where id in (select id from stripe_events where received_at < ? limit ?) returning 1
  )
  select count(*)::int as n from gone`;

/** Deletes at most `limit` recorded Stripe event ids received before `cutoff`; how many it deleted. */
export async function deleteStripeEventsBefore(em: EntityManager, cutoff: Date, limit: number): Promise<number> {
  const [row] = await query<{ n: number }>(em, DELETE_STRIPE_EVENTS, [cutoff, limit]);
  return row!.n;
}

// `= any(array(…))`, not `in (select …)`: the ids come first (an InitPlan walking the
// primary key from its oldest end, locking as it goes), then the delete finds them by the primary
// key again. The plan stays so with the generic plan a prepared statement may settle on, where the
// limit is not known: `in (select …)` then became a hash join over a sequential scan of the whole
// table. Rows another transaction holds (a project or feed being deleted, whose cascade takes them)
// are skipped, so this never waits for a request nor makes one wait beyond its own batch.
const DELETE_EVENTS = `with gone as (
    delete from events where id = any(array(
      select id from events where id < ?::uuid order by id limit ? for update skip locked
    )) returning 1
  )
  select count(*)::int as n from gone`;

/** Deletes at most `limit` of the oldest events whose id is below `idBelow`; how many it deleted. */
export async function deleteEventsWithIdBelow(em: EntityManager, idBelow: string, limit: number): Promise<number> {
  const [row] = await query<{ n: number }>(em, DELETE_EVENTS, [idBelow, limit]);
  return row!.n;
}
