/**
 * What a committed change tells the rest of the service, declared by the write itself: the live
 * fan-out's messages to every instance (a new event, a removed member, a deleted project, an ended
 * credential) and that webhook deliveries were queued. A domain function or a repository declares
 * them inside its transaction (`afterCommit`); they are handed, in order, to the one listener the
 * service registers (`onCommitted`, services.ts) only once that transaction has committed, and
 * never for one that rolled back or was run again after a collision. So no handler announces or
 * wakes anything, and nothing is announced that did not happen.
 */
import type { Configuration, EntityManager } from '@mikro-orm/postgresql';

/** The live fan-out's messages; they carry ids only, and readers load what they need. */
export type BusMessage =
  | { kind: 'event'; projectId: string; eventId: string }
  | { kind: 'member-removed'; projectId: string; userId: string }
  | { kind: 'project-deleted'; projectId: string }
  /** A session ended (logout) or an API token was revoked: what it opened ends with it. */
  | { kind: 'credential-ended'; credentialId: string };

export type CommitNotice = BusMessage | { kind: 'deliveries-queued' };

/** The notices declared so far in a transaction (its entity manager, and those of transactions nested in it). */
const declared = new WeakMap<EntityManager, CommitNotice[]>();
/** The listener of each database (the configuration every fork of its ORM shares). */
const listeners = new WeakMap<Configuration, (notices: CommitNotice[]) => void>();

/** Declares `notice` for once the transaction `tx` (of `transaction` or `ownTransaction`) commits. */
export function afterCommit(tx: EntityManager, notice: CommitNotice): void {
  const notices = declared.get(tx);
  if (notices === undefined) throw new Error('afterCommit needs the entity manager of a transaction of db/transaction.ts');
  notices.push(notice);
}

/** Who hears the notices of every transaction committed on `em`'s database. */
export function onCommitted(em: EntityManager, listener: (notices: CommitNotice[]) => void): void {
  listeners.set(em.config, listener);
}

/** The list `tx` collects into, if it is a transaction of db/transaction.ts. */
export function noticesOf(tx: EntityManager): CommitNotice[] | undefined {
  return declared.get(tx);
}

/** Runs `work` with `tx` collecting its notices into `notices`. */
export async function withNotices<T>(tx: EntityManager, notices: CommitNotice[], work: () => Promise<T>): Promise<T> {
  declared.set(tx, notices);
  try {
    return await work();
  } finally {
    declared.delete(tx);
  }
}

/** Hands the notices of a transaction that committed to its database's listener. */
export function committed(em: EntityManager, notices: CommitNotice[]): void {
  if (notices.length > 0) listeners.get(em.config)?.(notices);
}
