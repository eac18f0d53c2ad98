/** Whether the service can reach its database: what readiness answers. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ping } from '../db/queries/health.js';

/** Resolves once the database has answered the cheapest statement; rejects as that statement does. */
export function pingDatabase(em: EntityManager): Promise<void> {
  return ping(em);
}
