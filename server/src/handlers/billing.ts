import type { Handler } from '../http/handler-types.js';
import { applyWebhookEvent } from '../domain/billing.js';

/**
 * Stripe's events. Billing off: 503 before anything else. The signature is checked on the body
 * exactly as received; only then is anything read or written. An event for an unknown project or
 * subscription, or of a type not handled, is acknowledged (200) so Stripe stops resending it.
 */
export const stripeWebhook: Handler<'stripeWebhook'> = async ({ headers, rawBody, em, services }) => {
  // Billing configured (503 if not), then the signature (400 if missing, wrong or stale).
  const event = services.billing.verifyEvent(rawBody ?? '', headers['Stripe-Signature'] ?? '');
  const result = await applyWebhookEvent(em, services.config.stripe.priceTiers, event);
  const line = { stripeEvent: event.id, type: event.type, ...result };
  if (result.outcome === 'changed' && result.replacedBillingId) services.logger.warn(line, 'stripe checkout replaced a project subscription; the old one may still be billing');
  else services.logger.info(line, result.outcome === 'ignored' ? 'stripe event ignored' : 'stripe event');
  return { status: 200, data: { received: true } };
};
