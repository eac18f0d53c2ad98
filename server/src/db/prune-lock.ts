/**
 * Pruning's advisory lock (maintenance/prune.ts): held by one instance at a time, on a connection
 * of its own, for the whole of a run, so that instances sharing a database do not prune at once.
 */
import pg from 'pg';

/** The advisory lock (class, key) of pruning; the class differs from every other lock's of this service. */
const PRUNE_LOCK = [0x5b1f, 1] as const;

/**
 * Takes pruning's session advisory lock on a connection of its own to `databaseUrl`, the database
 * itself (`DATABASE_DIRECT_URL`: through a pooler in transaction mode the lock would stay on a server
 * session the pooler hands to others), and answers its release (which ends that session); undefined
 * when another session holds it. A lost connection also releases the lock, which at worst lets
 * another run overlap.
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
