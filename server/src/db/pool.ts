/**
 * The connection pool as the service's edges may see it: how busy it is (metrics), and the store
 * the rate limiter keeps its PostgreSQL counters in. What the pool is made of stays in raw.ts.
 */
import type { Database } from './orm.js';
import { poolUse as useOf, rateLimitStore as storeOf, type PoolUse } from './raw.js';

export type { PoolUse };

/** How busy the pool is, or undefined while it does not exist. */
export function poolUse(db: Pick<Database, 'orm'>): PoolUse | undefined {
  return useOf(db.orm);
}

/** The options that put rate-limiter-flexible's PostgreSQL store on the pool: spread them into its own. */
export function rateLimitStore(db: Pick<Database, 'orm'>): { storeClient: unknown; storeType: 'knex' } {
  return storeOf(db.orm);
}
