import type { Handler } from '../http/handler-types.js';
import { applyWebhookEvent } from '../domain/billing.js';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/**
 * `Stripe-Signature`, as Node gives header names (lower case). Read structurally: the handler
 * context must carry the request's headers for this (`headers: ctx.headers` in http/dispatch.ts).
 */
function signatureOf(context: object): string | undefined {
  const value = (context as { headers?: Headers }).headers?.['stripe-signature'];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * Stripe's events. Billing off: 503 before anything else. The signature is checked on the body
 * exactly as received; only then is anything read or written. An event for an unknown project or
 * subscription, or of a type not handled, is acknowledged (200) so Stripe stops resending it.
 */
export const stripeWebhook: Handler<'stripeWebhook'> = async (context) => {
  const { rawBody, em, services } = context;
  // Billing configured (503 if not), then the signature (400 if missing, wrong or stale).
  const event = services.billing.verifyEvent(rawBody ?? '', signatureOf(context) ?? '');
  const result = await applyWebhookEvent(em, services.config.stripe.priceTiers, event);
  const line = { stripeEvent: event.id, type: event.type, ...result };
  if (result.outcome === 'ignored') services.logger.info(line, 'stripe event ignored');
  else services.logger.info(line, 'stripe event');
  return { status: 200, data: { received: true } };
};
