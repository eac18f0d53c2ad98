/**
 * The domain's transactions, and the one order in which they take locks.
 *
 * Lock order, the invariant that keeps concurrent writers from deadlocking: a transaction that
 * counts what a user owns (its projects, its API tokens) locks that user's row first (`lockUser`),
 * as do an account's delete, a project's hand-over (both users, in id order) and an invite's
 * accept (the invitee), so that what an account owns or belongs to cannot change under its delete;
 * a transaction that writes to a project or to anything hanging off it (feeds, events, insights,
 * members, invites, activity) locks the project's row (`lockProject`) before it reads or writes any
 * of those children. The schema's foreign keys lock the project row again (KEY SHARE) on every
 * child insert, and a project's delete locks it FOR UPDATE and then cascades through every child:
 * a writer that touched a child before the project row could hold a child the delete needs while
 * waiting for the project row the delete holds. Taken first, the project row is where they queue.
 *
 * A writer that gets its lock after the project was deleted finds no row: 404, as for any project
 * that does not exist.
 *
 * Should PostgreSQL still abort a transaction as a deadlock or a serialization failure, `transaction`
 * runs it again, a bounded number of times; a change that keeps colliding answers 503 with
 * Retry-After, never 500.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DeadlockException, type EntityManager } from '@mikro-orm/postgresql';
import { committed, noticesOf, withNotices, type CommitNotice } from './commit-notices.js';
import { lockMembershipRow, lockProjectRow, lockUserRow, type RowLockStrength } from './row-locks.js';
import { projectNotFound, Unauthenticated, Unavailable } from '../errors.js';

/**
 * How a transaction holds its project's row:
 * - `key share`: an ordinary child write (an increment, an accept, a removal). Any number run at
 *   once, and alongside `no key update`; only the project's delete waits for them, and they for it.
 * - `no key update`: a count against a cap, a feed's delete (a project keeps one feed), an event's
 *   publication (ordered by id): one at a time per project, still alongside `key share` writers.
 *   Waiters in a mode that conflicts with the holder's queue in turn; `key share` takers never wait
 *   for a queued delete, so a writer that can pile up (publications) must not take `key share`.
 * - `update`: the project's delete, or a change to the project's own row (a new namespace, a unique
 *   column, would take this lock in the update itself: taken first, it is never an upgrade).
 */
export type ProjectLock = RowLockStrength;

function requireTransaction(tx: EntityManager): void {
  // A row lock outside a transaction ends with its statement: it would order nothing.
  if (!tx.isInTransaction()) throw new Error('a row lock needs a transaction');
}

/** Locks the project's row in `mode` until `tx` ends; 404 when the project does not exist (or was just deleted). */
export async function lockProject(tx: EntityManager, projectId: string, mode: ProjectLock): Promise<void> {
  requireTransaction(tx);
  if (!(await lockProjectRow(tx, projectId, mode))) throw projectNotFound();
}

/**
 * Locks the user's row until `tx` ends, so that counting what the user owns and adding to it is
 * one step for concurrent requests of that user. FOR NO KEY UPDATE: the foreign keys of rows
 * inserted meanwhile (KEY SHARE) do not wait for it.
 */
export async function lockUser(tx: EntityManager, userId: string): Promise<void> {
  requireTransaction(tx);
  // The account is gone (and with it the credential this request came with).
  if (!(await lockUserRow(tx, userId))) throw new Unauthenticated();
}

/**
 * Locks the user's membership of the project until `tx` ends (taken after the project's row), for
 * a write that makes something answer to that member (a webhook endpoint): a departure, which
 * deletes the membership and then ends what answers to the member, either waits for `tx` and then
 * sees what it wrote, or has committed first and `tx` answers 404, as to any non-member.
 */
export async function lockMembership(tx: EntityManager, projectId: string, userId: string): Promise<void> {
  requireTransaction(tx);
  if (!(await lockMembershipRow(tx, projectId, userId))) throw projectNotFound();
}

const ATTEMPTS = 3;

/** A deadlock (40P01) or a serialization failure (40001): PostgreSQL rolled the transaction back; running it again may succeed. */
function isCollision(error: unknown): boolean {
  if (error instanceof DeadlockException) return true;
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === '40P01' || code === '40001';
}

/**
 * Runs `work` in a transaction; retries it, after a short random pause, when PostgreSQL aborts it
 * as a collision with another transaction. `work` must therefore do nothing outside `tx` that a
 * second run would repeat. Nested in another transaction, it is not retried on its own: the
 * outermost transaction is.
 */
export function transaction<T>(em: EntityManager, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  // Nested, its notices are the outer transaction's: they wait for the outermost commit.
  const outer = em.isInTransaction() ? noticesOf(em) : undefined;
  return retried(em, async () => {
    const notices = outer ?? [];
    const result = await em.transactional((tx) => withNotices(tx, notices, () => work(tx)));
    if (outer === undefined) committed(em, notices);
    return result;
  });
}

/**
 * Runs `statement`, a write that is one statement and so a transaction of its own (no BEGIN and
 * COMMIT around it: one round trip), with `transaction`'s retry. The statement takes its locks in
 * the order above itself; PostgreSQL rolled the whole of it back when it aborted it, so running it
 * again applies nothing twice. `em` must not be in a transaction.
 */
export function ownTransaction<T>(em: EntityManager, statement: (em: EntityManager) => Promise<T>): Promise<T> {
  if (em.isInTransaction()) throw new Error('a statement that is a transaction of its own runs outside any other');
  return retried(em, async () => {
    const notices: CommitNotice[] = [];
    const result = await withNotices(em, notices, () => statement(em));
    committed(em, notices);
    return result;
  });
}

async function retried<T>(em: EntityManager, run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (!isCollision(error) || em.isInTransaction()) throw error;
      if (attempt === ATTEMPTS) throw new Unavailable('The change kept colliding with concurrent changes; retry it.', 1);
      await sleep(attempt * (10 + Math.random() * 40));
    }
  }
}

/**
 * Writes what the unit of work of `tx` holds (entities added or changed since the last write,
 * activity records included) now, inside the transaction: a unique violation surfaces here, as
 * `conflictOn` expects, and the statements after it see the rows. A transaction writes the rest
 * when it commits.
 */
export async function writeChanges(tx: EntityManager): Promise<void> {
  await tx.flush();
}
