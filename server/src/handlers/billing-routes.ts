import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { presentCheckoutSession, presentPortalSession } from '../presenters/billing-presenters.js';

/**
 * Stripe sends events of a few KiB; this bounds what an anonymous sender can make the service read
 * and hash before the signature refuses it.
 */
export const WEBHOOK_BODY_LIMIT_BYTES = 256 * 1024;

/**
 * Stripe's events (`x-raw-body`: the pipeline has not read the body). In this order, each step
 * before any work of the next: billing and its webhook secret configured (503, before a byte of
 * the body is read); the body read, up to WEBHOOK_BODY_LIMIT_BYTES (413, 415); its signature
 * checked on the bytes as received, and only then parsed (400); what the service takes from the
 * event held to the contract's rules for any body (400). An event for an unknown project or
 * subscription, or of a type not handled, is acknowledged (200) so Stripe stops resending it; one
 * whose change needs Stripe (a checkout that replaces a subscription cancels the old one) fails
 * with 502 while Stripe cannot be reached, and Stripe sends it again.
 */
export const stripeWebhook: Handler<'stripeWebhook'> = async ({ headers, readRawBody, validateBody, em, services }) => {
  services.billing.assertWebhookOn();
  const rawBody = await readRawBody(WEBHOOK_BODY_LIMIT_BYTES);
  const event = services.billing.verifyEvent(rawBody, headers['Stripe-Signature'] ?? '');
  validateBody(event);
  const result = await services.subscriptions.applyEvent({ em }, event);
  services.logger.info(
    { stripeEvent: event.id, type: event.type, ...result },
    result.outcome === 'ignored' ? 'stripe event ignored' : 'stripe event',
  );
  return { status: 200, data: { received: true } };
};

export const createCheckoutSession: Handler<'createCheckoutSession'> = async ({ params, body, headers, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'billing.checkout');
  const session = await services.subscriptions.checkout({ em, caller }, project, body.tier, headers['Idempotency-Key']);
  return { status: 201, data: presentCheckoutSession(session) };
};

export const createPortalSession: Handler<'createPortalSession'> = async ({ params, headers, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'billing.portal');
  const session = await services.subscriptions.portal({ em, caller }, project, headers['Idempotency-Key']);
  return { status: 201, data: presentPortalSession(session) };
};
