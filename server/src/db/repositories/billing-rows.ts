/**
 * The billing aggregate (docs/development.md, Layers): the rows that make Stripe's webhook
 * deliveries idempotent and order-proof, a claimed event id (`stripe_events`) and each
 * subscription's last known state (`stripe_subscriptions`), their retention, and the project's plan
 * (`projects.tier` and `billing_id`) as the webhook reads and changes it.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Project, StripeSubscription } from '../entities.js';
import { query } from '../raw.js';
import { lockProject } from '../transaction.js';
import { NotFound } from '../../errors.js';

// ---------- Stripe event ids ----------

const CLAIM = 'insert into stripe_events (id, type, received_at) values (?, ?, ?) on conflict (id) do nothing returning id';

/**
 * Records the event's id; false when it is recorded already. A concurrent claim of the same id
 * waits for the transaction of the first and then finds it taken.
 */
export async function claimStripeEvent(tx: EntityManager, id: string, type: string, receivedAt: Date): Promise<boolean> {
  return (await query(tx, CLAIM, [id, type, receivedAt])).length > 0;
}

const DELETE_STRIPE_EVENTS = `with gone as (
    delete from stripe_events where id in (select id from stripe_events where received_at < ? limit ?) returning 1
  )
  select count(*)::int as n from gone`;

/** Deletes at most `limit` recorded Stripe event ids received before `cutoff`; how many it deleted. */
export async function deleteStripeEventsBefore(em: EntityManager, cutoff: Date, limit: number): Promise<number> {
  const [row] = await query<{ n: number }>(em, DELETE_STRIPE_EVENTS, [cutoff, limit]);
  return row!.n;
}

// ---------- Subscriptions ----------

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

/** The subscription's last known state, read afresh; null when none of its events came yet. */
export function findSubscription(tx: EntityManager, id: string): Promise<StripeSubscription | null> {
  return tx.findOne(StripeSubscription, { id }, { refresh: true });
}

// ---------- The project's plan ----------

/**
 * The project's row locked FOR UPDATE until `tx` ends (`lockProject`: its plan is a change to the
 * project's own row, `billing_id` a unique column), then the project read afresh; null when there
 * is no such project (or it was just deleted).
 */
export async function lockProjectForPlan(tx: EntityManager, projectId: string): Promise<Project | null> {
  try {
    await lockProject(tx, projectId, 'update');
  } catch (error) {
    if (error instanceof NotFound) return null;
    throw error;
  }
  return tx.findOneOrFail(Project, { id: projectId }, { refresh: true });
}

/** The id of the project whose subscription is `subscriptionId` (one at most: `billing_id` is unique), other than `exceptProjectId`. */
export async function projectIdWithSubscription(
  tx: EntityManager,
  subscriptionId: string,
  exceptProjectId?: string,
): Promise<string | undefined> {
  const where = exceptProjectId === undefined ? { billingId: subscriptionId } : { billingId: subscriptionId, id: { $ne: exceptProjectId } };
  return (await tx.findOne(Project, where, { fields: ['id'] }))?.id;
}

/** Sets the project's tier and subscription, written at once. */
export async function setProjectPlan(tx: EntityManager, project: Project, plan: { tier: number; billingId: string | null }): Promise<void> {
  project.tier = plan.tier;
  project.billingId = plan.billingId;
  await tx.flush();
}
