/**
 * Stripe's webhook events as the tests send them: built like Stripe's (an event wrapping its
 * object), signed with the stripe package's own test-header helper, and delivered to a server.
 */
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { send, type Answer } from './http.js';

/** How a delivery is signed: with `secret` (at `timestamp`), or with `header` as given, or (null) not at all. */
export interface Signing {
  secret?: string;
  timestamp?: number;
  header?: string | null;
}

/** Delivers `event` to the webhook of the server at `origin`, signed as `signing` says. */
export function deliverEvent(origin: string, event: object, signing: Signing): Promise<Answer> {
  const payload = JSON.stringify(event);
  const header =
    signing.header === null
      ? undefined
      : (signing.header ??
        Stripe.webhooks.generateTestHeaderString({
          payload,
          secret: signing.secret ?? '',
          ...(signing.timestamp !== undefined ? { timestamp: signing.timestamp } : {}),
        }));
  return send(origin, {
    method: 'POST',
    path: '/v1/billing/webhook',
    headers: header !== undefined ? { 'Stripe-Signature': header } : {},
    raw: { body: payload, contentType: 'application/json' },
  });
}

export function stripeEvent(type: string, object: Record<string, unknown>, id = `evt_${randomBytes(12).toString('hex')}`) {
  return {
    id,
    object: 'event',
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    type,
    data: { object },
  };
}

/** The same event as if Stripe had created it `seconds` ago. */
export function createdAgo<T extends { created: number }>(event: T, seconds: number): T {
  return { ...event, created: Math.floor(Date.now() / 1000) - seconds };
}

export function checkoutCompleted(projectId: string, subscription: string, id?: string) {
  return stripeEvent(
    'checkout.session.completed',
    {
      id: `cs_test_${randomBytes(8).toString('hex')}`,
      object: 'checkout.session',
      mode: 'subscription',
      client_reference_id: projectId,
      subscription,
      status: 'complete',
    },
    id,
  );
}

export function subscription(id: string, price: string, status = 'active') {
  return {
    id,
    object: 'subscription',
    status,
    items: {
      object: 'list',
      data: [{ id: `si_${randomBytes(6).toString('hex')}`, object: 'subscription_item', price: { id: price, object: 'price' } }],
    },
  };
}

export function subscriptionUpdated(id: string, price: string, status = 'active', eventId?: string) {
  return stripeEvent('customer.subscription.updated', subscription(id, price, status), eventId);
}

export function subscriptionDeleted(id: string, price: string, eventId?: string) {
  return stripeEvent('customer.subscription.deleted', subscription(id, price, 'canceled'), eventId);
}

export function newSubscriptionId(): string {
  return `sub_${randomBytes(8).toString('hex')}`;
}
