/**
 * What the service stops keeping: recorded Stripe event ids, events and `Idempotency-Key`s past
 * their retention, deleted in bounded batches (icons nothing refers to go the same way,
 * domain/icons.ts). The background maintenance (maintenance/prune.ts) runs these, one instance at
 * a time under the pruning lock.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteExpiredKeys } from '../db/repositories/idempotency-rows.js';
import { deleteStripeEventsBefore } from '../db/repositories/billing-rows.js';
import { deleteEventsWithIdBelow } from '../db/repositories/events-rows.js';
import { deleteSettledDeliveries } from '../db/repositories/webhook-outbox.js';
import { KEY_LIFETIME_MS } from './idempotency.js';

/** How much one run deletes of a kind: `batchSize` rows a statement, at most `maxBatches` of them. */
export interface Batches {
  batchSize: number;
  maxBatches: number;
  /** Checked before each batch: true ends the run's deleting (the service is stopping). */
  stopping: () => boolean;
  /** A pause between two batches, so that requests get the database (and, embedded, its one session) in between. */
  pauseMs?: number;
}

/** Runs `deleteBatch` until a batch deletes fewer than `batchSize` rows, `maxBatches` ran, or `stopping()`; how many it deleted. */
export async function inBatches(deleteBatch: (limit: number) => Promise<number>, batches: Batches): Promise<number> {
  let removed = 0;
  for (let batch = 0; batch < batches.maxBatches; batch++) {
    if (batch > 0 && batches.pauseMs) await sleep(batches.pauseMs);
    if (batches.stopping()) break;
    const n = await deleteBatch(batches.batchSize);
    removed += n;
    if (n < batches.batchSize) break;
  }
  return removed;
}

/** Deletes the Stripe event ids received before `cutoff`, in batches; how many it deleted. */
export function deleteStripeEventsReceivedBefore(em: EntityManager, cutoff: Date, batches: Batches): Promise<number> {
  return inBatches((limit) => deleteStripeEventsBefore(em, cutoff, limit), batches);
}

/**
 * The smallest UUID v7 of `time`'s millisecond: its 48-bit timestamp, the version, the variant, and
 * zeros. Every UUID v7 made at or after that millisecond sorts at or above it (as text and in
 * PostgreSQL, which compares uuids byte by byte), every one made before sorts below.
 */
export function firstUuidV7At(time: Date): string {
  const ms = time.getTime();
  if (!Number.isInteger(ms) || ms < 0 || ms >= 2 ** 48) throw new RangeError(`no UUID v7 for ${time.toISOString()}`);
  const hex = ms.toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-000000000000`;
}

/**
 * Deletes the events stored before `cutoff`, oldest first, in batches; how many it deleted.
 *
 * Expressed on the primary key, so each batch walks its index from the oldest end and needs no
 * other: an event's id is a UUID v7 chosen when it is stored (domain/events.ts `idAfter`), never
 * below the v7 of its storage time. An id below `firstUuidV7At(cutoff)` therefore belongs to an
 * event stored before `cutoff`: no newer event is ever deleted. (An event whose id was pushed ahead
 * of its storage time, by another instance's clock, is kept until the cutoff passes its id.)
 */
export function deleteEventsStoredBefore(em: EntityManager, cutoff: Date, batches: Batches): Promise<number> {
  const idBelow = firstUuidV7At(cutoff);
  return inBatches((limit) => deleteEventsWithIdBelow(em, idBelow, limit), batches);
}

/** How long a webhook delivery that has settled (delivered or failed) stays in its endpoint's log. */
export const DELIVERY_LOG_MS = 7 * 86_400_000;

/**
 * Deletes the webhook deliveries queued more than `DELIVERY_LOG_MS` ago that are no longer
 * pending, oldest first, in batches: by id, a UUID v7 of when it was queued (as events are).
 */
export function deleteSettledWebhookDeliveries(em: EntityManager, batches: Batches): Promise<number> {
  const idBelow = firstUuidV7At(new Date(Date.now() - DELIVERY_LOG_MS));
  return inBatches((limit) => deleteSettledDeliveries(em, idBelow, limit), batches);
}

/** Deletes the `Idempotency-Key`s past their lifetime (by the database's clock), oldest first, in batches; how many it deleted. */
export function deleteExpiredIdempotencyKeys(em: EntityManager, batches: Batches): Promise<number> {
  return inBatches((limit) => deleteExpiredKeys(em, KEY_LIFETIME_MS, limit), batches);
}
