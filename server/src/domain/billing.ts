/**
 * Stripe's webhook events applied to projects: `tier` and `billing_id` kept in step with the
 * subscription. Each event runs in one transaction that first records its id in `stripe_events`:
 * a redelivered or replayed event finds its id there and changes nothing, and a change that fails
 * leaves no id behind, so Stripe's next delivery tries again (as does `transaction`'s own retry,
 * when PostgreSQL aborts it as a deadlock). The project row is locked for the change (FOR UPDATE,
 * as a delete locks it, before the project is read: db/transaction.ts), so an event and a delete of
 * the same project never interleave.
 *
 * Stripe does not deliver in order. A subscription's own events (`customer.subscription.*`) keep
 * its last known status and tier in `stripe_subscriptions`, with the `created` time of the event
 * that said so: an event older than that is skipped, and a checkout that completes after its
 * subscription's first events takes the tier from there. A canceled subscription stays canceled.
 *
 * Starting a plan (a Checkout Session) and managing it (a Customer Portal session) store nothing:
 * they check what the service knows (the tier's price, whether the project has a subscription)
 * and leave the rest to Stripe, whose events then come back through the webhook above.
 *
 * A checkout that completes for a project that already has another subscription (two checkouts
 * started side by side, both paid) gives the project the new subscription and cancels the old one
 * at Stripe, in the event's transaction: a project is billed by one subscription, never by one the
 * service no longer follows. When Stripe cannot confirm the cancel, the event fails whole (502) and
 * Stripe delivers it again.
 *
 * Events are plain data here (the billing adapter verified and parsed them): nothing in this file
 * depends on the stripe package.
 */
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Project, User } from '../db/entities.js';
import {
  claimStripeEvent,
  findSubscription,
  lockProjectForPlan,
  projectIdWithSubscription,
  rememberSubscription,
  setProjectPlan,
} from '../db/repositories/billing-rows.js';
import { getProjectAfresh } from '../db/repositories/projects-rows.js';
import { lockProject, transaction } from '../db/transaction.js';
import { AlreadySubscribed, InvalidRequest, NoSubscription } from '../errors.js';
import { confirmAccess } from './access.js';
import { recordActivity } from './activity.js';
import type { Scope } from './scope.js';

/** A verified Stripe event: its id, its type and the object it carries (`data.object`). */
export interface WebhookEvent {
  id: string;
  type: string;
  /** When Stripe created the event, in seconds since the epoch. */
  created: number;
  object: Record<string, unknown>;
}

/** Checks a webhook delivery's signature and parses it; the billing adapter implements it. */
export interface WebhookVerifier {
  /** Throws 503 `unavailable` when billing or its webhook secret is not configured: asked before the body is read. */
  assertWebhookOn(): void;
  /**
   * The event in `rawBody` (the bytes as received), if `signature` (the `Stripe-Signature` header)
   * signs it with the configured secret and is recent; nothing is parsed before that is known.
   * Throws 400 `invalid_request` otherwise, and 503 `unavailable` as `assertWebhookOn` does.
   */
  verifyEvent(rawBody: Buffer, signature: string): WebhookEvent;
}

/**
 * The billing adapter (billing/index.ts): cancels a project's subscription before the project is
 * deleted, and verifies Stripe's webhook deliveries.
 */
export interface SubscriptionCanceller extends WebhookVerifier {
  /**
   * Resolves once Stripe has cancelled the subscription or says it no longer exists. Throws 502
   * `billing_unavailable` when that cannot be confirmed in bounded time (Stripe unreachable, timing
   * out or failing), or when billing is not configured.
   */
  cancelSubscription(billingId: string): Promise<void>;
}

/** What an event did: changed a project, found nothing to change, was not for us, or was seen before. */
export type EventOutcome =
  | { outcome: 'changed'; projectId: string; tier: number; billingId: string | null; replacedBillingId?: string }
  | { outcome: 'unchanged'; projectId: string }
  | { outcome: 'ignored'; reason: string }
  | { outcome: 'duplicate' };

/** Subscription states in which the customer has paid for (or is trialling) the tier of its price. */
const PAYING_STATUSES = new Set(['active', 'trialing']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `value` as a JSON object, or undefined when it is anything else (an array, null, a scalar). */
function asObject(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** `value` when it is a non-empty string, else undefined. */
function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** An id field Stripe sends either as the id or as the expanded object. */
function idOf(value: unknown): string | undefined {
  return nonEmptyString(value) ?? nonEmptyString(asObject(value)?.id);
}

/**
 * The tier a subscription pays for: the highest tier among its items' prices that the configuration
 * maps, while it is active or trialing; 0 otherwise (past due, unpaid, canceled, incomplete, paused,
 * or a price the configuration does not know).
 */
export function tierOf(subscription: Record<string, unknown>, priceTiers: ReadonlyMap<string, number>): number {
  if (!PAYING_STATUSES.has(String(subscription.status))) return 0;
  const items = asObject(subscription.items)?.data;
  let tier = 0;
  for (const item of Array.isArray(items) ? items : []) {
    const price = idOf(asObject(item)?.price);
    const mapped = price === undefined ? undefined : priceTiers.get(price);
    if (mapped !== undefined && mapped > tier) tier = mapped;
  }
  return tier;
}

/** `checkout.session.completed`: the project named by the session takes its subscription, and the subscription's tier if known. */
async function completeCheckout(tx: EntityManager, billing: SubscriptionCanceller, event: WebhookEvent): Promise<EventOutcome> {
  const object = event.object;
  const projectId = nonEmptyString(object.client_reference_id);
  const subscription = idOf(object.subscription);
  if (!projectId || !UUID.test(projectId)) return { outcome: 'ignored', reason: 'no project id in client_reference_id' };
  if (!subscription) return { outcome: 'ignored', reason: 'the session created no subscription' };
  const project = await lockProjectForPlan(tx, projectId);
  if (!project) return { outcome: 'ignored', reason: 'unknown project' };
  // A subscription belongs to one project (billing_id is unique): never move it to a second one.
  if (await projectIdWithSubscription(tx, subscription, project.id))
    return { outcome: 'ignored', reason: 'the subscription already belongs to another project' };
  const known = await findSubscription(tx, subscription);
  if (known?.status === 'canceled') return { outcome: 'ignored', reason: 'the subscription was deleted before its checkout completed' };
  // The subscription's own events may have come first: they know its tier.
  const tier = known ? known.tier : project.tier;
  if (project.billingId === subscription && project.tier === tier) return { outcome: 'unchanged', projectId: project.id };
  // A project that already had another subscription: the new one replaces it, and the old one is
  // cancelled first (the activity record keeps its id). The project row stays locked meanwhile,
  // for at most the billing adapter's deadline, as a project's delete holds it.
  const replaced = project.billingId && project.billingId !== subscription ? project.billingId : undefined;
  if (replaced) await billing.cancelSubscription(replaced);
  return changePlan(tx, project, event, { tier, billingId: subscription, replaced });
}

/**
 * `customer.subscription.*`: the subscription's state is remembered (unless the event is older than
 * the last one applied), and the project that has it follows its tier, or loses it when deleted.
 */
async function followSubscription(tx: EntityManager, priceTiers: ReadonlyMap<string, number>, event: WebhookEvent): Promise<EventOutcome> {
  const object = event.object;
  const subscription = nonEmptyString(object.id);
  if (!subscription) return { outcome: 'ignored', reason: 'no subscription id' };
  const deleted = event.type === 'customer.subscription.deleted';
  const tier = deleted ? 0 : tierOf(object, priceTiers);
  const status = deleted ? 'canceled' : (nonEmptyString(object.status) ?? 'unknown');
  if (!(await rememberSubscription(tx, { id: subscription, status, tier, eventCreated: new Date(event.created * 1000) }))) {
    return { outcome: 'ignored', reason: 'older than the last event applied to this subscription, or it was canceled' };
  }
  const noProject = { outcome: 'ignored', reason: 'no project has this subscription (yet)' } as const;
  const projectId = await projectIdWithSubscription(tx, subscription);
  if (!projectId) return noProject;
  const project = await lockProjectForPlan(tx, projectId);
  // Deleted, or its subscription changed, between the read and the lock.
  if (!project || project.billingId !== subscription) return noProject;
  if (deleted) return changePlan(tx, project, event, { tier: 0, billingId: null });
  if (tier === project.tier) return { outcome: 'unchanged', projectId: project.id };
  return changePlan(tx, project, event, { tier, billingId: subscription });
}

/**
 * Sets the project's tier and subscription, and records the change in its log; `replaced` is the
 * subscription the project had before, which a checkout cancelled.
 */
async function changePlan(
  tx: EntityManager,
  project: Project,
  event: WebhookEvent,
  { tier, billingId, replaced }: { tier: number; billingId: string | null; replaced?: string },
): Promise<EventOutcome> {
  await setProjectPlan(tx, project, { tier, billingId });
  recordActivity(tx, {
    project,
    actor: null,
    type: 'billing.changed',
    data: {
      event: event.type,
      event_id: event.id,
      tier,
      billing_id: billingId,
      ...(replaced ? { replaced_billing_id: replaced } : {}),
    },
  });
  return {
    outcome: 'changed',
    projectId: project.id,
    tier,
    billingId,
    ...(replaced ? { replacedBillingId: replaced } : {}),
  };
}

/** What the billing adapter needs to create a Checkout Session for a project. */
export interface CheckoutRequest {
  projectId: string;
  /** The Stripe price of the tier asked for. */
  price: string;
  /** Passed to Stripe so that a retried request makes one session; undefined without an `Idempotency-Key`. */
  idempotencyKey: string | undefined;
}

/** Starts and manages plans through Stripe's hosted pages; the billing adapter implements it. */
export interface PlanSessions {
  /** Throws 503 `unavailable` when billing, or the addresses a checkout returns to, are not configured. */
  assertCheckoutOn(): void;
  /** Throws 503 `unavailable` when billing, or the portal's return address, is not configured. */
  assertPortalOn(): void;
  /** A subscription-mode Checkout Session; 502 `billing_unavailable` when Stripe fails or does not answer in bounded time. */
  createCheckoutSession(request: CheckoutRequest): Promise<{ id: string; url: string }>;
  /**
   * A Customer Portal session for the subscription's customer; 409 `no_subscription` when Stripe
   * says the subscription does not exist, 502 `billing_unavailable` when Stripe fails.
   */
  createPortalSession(subscriptionId: string, idempotencyKey: string | undefined): Promise<{ url: string }>;
}

/** The price of `tier`: the first one `STRIPE_PRICE_TIERS` lists for it, or undefined when none is. */
export function priceOfTier(priceTiers: ReadonlyMap<string, number>, tier: number): string | undefined {
  for (const [price, mapped] of priceTiers) if (mapped === tier) return price;
  return undefined;
}

/**
 * The idempotency key sent to Stripe for a request that carried `Idempotency-Key`: the same for a
 * retry of the same request (same user, project, kind and key), and never the same for two users'
 * keys, which the service keeps apart too. Hashed, so it is as long as Stripe takes whatever the
 * client sent.
 */
export function stripeIdempotencyKey(
  kind: 'checkout' | 'portal',
  userId: string,
  projectId: string,
  key: string | undefined,
): string | undefined {
  if (key === undefined) return undefined;
  const digest = createHash('sha256').update(`${userId}\n${projectId}\n${key}`).digest('hex');
  return `signalboard-${kind}-${digest}`;
}

/**
 * The project as it is once the caller is confirmed its owner under the project's row lock: an
 * owner who handed the project over after `projectAccess` read its role (a transfer holds the row
 * FOR UPDATE until it commits) gets 403 `not_owner`, as for any owner-only write. KEY SHARE waits
 * for a transfer or a delete in flight and lets other writers go on. The lock is not held while
 * Stripe answers: nothing is stored, so the call after the check is the call of an owner, and
 * holding a connection through a network call would stall the embedded database's only one.
 */
function asOwner(
  em: EntityManager,
  project: Pick<Project, 'id'>,
  actor: Pick<User, 'id'>,
  action: 'billing.checkout' | 'billing.portal',
): Promise<Project> {
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    await confirmAccess(tx, project.id, actor, action);
    return getProjectAfresh(tx, project.id);
  });
}

/** What the subscriptions module is built with (services.ts). */
export interface SubscriptionsDeps {
  /** The billing adapter (billing/index.ts). */
  billing: PlanSessions & SubscriptionCanceller;
  /** `STRIPE_PRICE_TIERS`: the tier each Stripe price pays for. */
  priceTiers: ReadonlyMap<string, number>;
}

/** Projects' plans: Stripe's events applied, checkouts started, the customer portal opened. */
export class Subscriptions {
  constructor(private readonly deps: SubscriptionsDeps) {}

  /**
   * Applies one verified event, at most once per event id, in one transaction (run again, whole,
   * when PostgreSQL aborts it as a deadlock: the claim of the id is undone with the rest). Unknown
   * projects, subscriptions and event types are ignored.
   */
  async applyEvent({ em }: Pick<Scope, 'em'>, event: WebhookEvent): Promise<EventOutcome> {
    return transaction(em, async (tx): Promise<EventOutcome> => {
      // Claims the event id. A concurrent delivery of the same event waits here for this transaction
      // and then finds the id taken.
      if (!(await claimStripeEvent(tx, event.id, event.type, new Date()))) return { outcome: 'duplicate' };
      switch (event.type) {
        case 'checkout.session.completed':
          return completeCheckout(tx, this.deps.billing, event);
        case 'customer.subscription.created':
        case 'customer.subscription.updated':
        case 'customer.subscription.deleted':
          return followSubscription(tx, this.deps.priceTiers, event);
        default:
          return { outcome: 'ignored', reason: 'event type not handled' };
      }
    });
  }

  /**
   * Starts a checkout for `tier`; `clientKey` is the request's `Idempotency-Key`, if any
   * (`stripeIdempotencyKey`). In this order: billing configured (503); a price for the tier
   * (400); no subscription yet (409); then Stripe (502). Nothing is stored: the project changes only
   * when Stripe reports the completed checkout to the webhook.
   */
  async checkout(
    { em, caller }: Scope,
    project: Pick<Project, 'id'>,
    tier: number,
    clientKey: string | undefined,
  ): Promise<{ id: string; url: string }> {
    this.deps.billing.assertCheckoutOn();
    const price = priceOfTier(this.deps.priceTiers, tier);
    if (price === undefined) {
      throw new InvalidRequest('No plan is sold for this tier.', [
        { path: '/body/tier', message: 'no Stripe price is configured for this tier' },
      ]);
    }
    const current = await asOwner(em, project, { id: caller.userId }, 'billing.checkout');
    if (current.billingId) throw new AlreadySubscribed();
    const idempotencyKey = stripeIdempotencyKey('checkout', caller.userId, project.id, clientKey);
    return this.deps.billing.createCheckoutSession({ projectId: current.id, price, idempotencyKey });
  }

  /** Opens the customer portal for the project's subscription: 503 when billing is off, 409 without a subscription; `clientKey` as for `checkout`. */
  async portal({ em, caller }: Scope, project: Pick<Project, 'id'>, clientKey: string | undefined): Promise<{ url: string }> {
    this.deps.billing.assertPortalOn();
    const current = await asOwner(em, project, { id: caller.userId }, 'billing.portal');
    if (!current.billingId) throw new NoSubscription();
    return this.deps.billing.createPortalSession(current.billingId, stripeIdempotencyKey('portal', caller.userId, project.id, clientKey));
  }
}
