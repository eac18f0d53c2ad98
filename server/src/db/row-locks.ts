/**
 * The row locks a transaction takes before it counts or writes: a project's row, in the strength
 * the change needs, and a user's row (db/transaction.ts says which, and in what order). Each
 * answers whether the row exists; a lock outside a transaction would end with its statement.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from './raw.js';

/** PostgreSQL's row-lock strengths the service takes on a project's row. */
export type RowLockStrength = 'key share' | 'no key update' | 'update';

const PROJECT_LOCKS: Record<RowLockStrength, string> = {
  'key share': 'select 1 from projects where id = ? for key share',
  'no key update': 'select 1 from projects where id = ? for no key update',
  update: 'select 1 from projects where id = ? for update',
};

/** Locks the project's row in `strength` until `tx` ends; false when there is no such row. */
export async function lockProjectRow(tx: EntityManager, projectId: string, strength: RowLockStrength): Promise<boolean> {
  return (await query(tx, PROJECT_LOCKS[strength], [projectId])).length > 0;
}

/**
 * Locks the user's membership row of the project FOR KEY SHARE until `tx` ends; false when the
 * user is no member. A departure deletes that row, so it waits for `tx`, or `tx` finds no row.
 */
export async function lockMembershipRow(tx: EntityManager, projectId: string, userId: string): Promise<boolean> {
  return (
    (await query(tx, 'select 1 from project_members where project_id = ? and user_id = ? for key share', [projectId, userId])).length > 0
  );
}

/** Locks the user's row FOR NO KEY UPDATE until `tx` ends; false when there is no such row. */
export async function lockUserRow(tx: EntityManager, userId: string): Promise<boolean> {
  return (await query(tx, 'select 1 from users where id = ? for no key update', [userId])).length > 0;
}
