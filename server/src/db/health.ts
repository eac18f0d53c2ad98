/** Whether the database answers at all: the cheapest statement, on a connection of the pool. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from './raw.js';

/** Resolves once the database has answered `select 1`. */
export async function ping(em: EntityManager): Promise<void> {
  await query(em, 'select 1', []);
}
