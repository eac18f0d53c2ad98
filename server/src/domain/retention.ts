/**
 * What the service stops keeping: recorded Stripe event ids past their retention, deleted in
 * bounded batches, and icon files nothing refers to (a project's or a user's icon keeps its file).
 * The background maintenance (maintenance/prune.ts) runs these, one instance at a time under the
 * pruning lock.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteStripeEventsBefore, referencedIcons } from '../db/queries/retention.js';

export { tryPruneLock } from '../db/queries/retention.js';

/**
 * Deletes the Stripe event ids received before `cutoff`, `batchSize` at a time, for at most
 * `maxBatches` batches and until `stopping()`; how many it deleted.
 */
export async function deleteStripeEventsReceivedBefore(
  em: EntityManager,
  cutoff: Date,
  batches: { batchSize: number; maxBatches: number; stopping: () => boolean },
): Promise<number> {
  let removed = 0;
  for (let batch = 0; batch < batches.maxBatches && !batches.stopping(); batch++) {
    const n = await deleteStripeEventsBefore(em, cutoff, batches.batchSize);
    removed += n;
    if (n < batches.batchSize) break;
  }
  return removed;
}

/** The icon keys among `keys` that a project's or a user's icon refers to. */
export function iconsInUse(em: EntityManager, keys: string[]): Promise<Set<string>> {
  return referencedIcons(em, keys);
}
