/**
 * The rows that make Stripe's webhook deliveries idempotent and order-proof: a claimed event id
 * (`stripe_events`) and each subscription's last known state (`stripe_subscriptions`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

const CLAIM = 'insert into stripe_events (id, type, received_at) values (?, ?, ?) on conflict (id) do nothing returning id';

/**
 * Records the event's id; false when it is recorded already. A concurrent claim of the same id
 * waits for the transaction of the first and then finds it taken.
 */
export async function claimStripeEvent(tx: EntityManager, id: string, type: string, receivedAt: Date): Promise<boolean> {
  return (await query(tx, CLAIM, [id, type, receivedAt])).length > 0;
}

const REMEMBER = `insert into stripe_subscriptions (id, status, tier, event_created) values (?, ?, ?, ?)
  on conflict (id) do update set status = excluded.status, tier = excluded.tier, event_created = excluded.event_created
  where stripe_subscriptions.status <> 'canceled' and stripe_subscriptions.event_created <= excluded.event_created
  returning id`;

export interface SubscriptionState {
  id: string;
  status: string;
  tier: number;
  /** When Stripe created the event that says so. */
  eventCreated: Date;
}

/**
 * Stores a subscription's state, unless a newer event's state is stored already or the stored one
 * is canceled (which is final); whether it was stored.
 */
export async function rememberSubscription(tx: EntityManager, state: SubscriptionState): Promise<boolean> {
  return (await query(tx, REMEMBER, [state.id, state.status, state.tier, state.eventCreated])).length > 0;
}
