/**
 * The billing adapter behind the small interfaces the domain uses (`SubscriptionCanceller`:
 * cancel a subscription, verify a webhook delivery; `PlanSessions`: start a checkout, open the
 * customer portal). With no `STRIPE_SECRET_KEY`, billing is off: nothing calls Stripe, the webhook,
 * checkout and portal answer 503, and a project that carries a subscription cannot be deleted
 * (502), since no paying subscription may outlive its project.
 */
import type { Config } from '../config.js';
import type { PlanSessions } from '../domain/billing.js';
import type { SubscriptionCanceller } from '../domain/billing.js';
import { BillingUnavailable, Unavailable } from '../errors.js';
import type { Logger } from '../logger.js';
import { StripeBilling } from './stripe.js';

/** Everything the service asks of billing. */
export type Billing = SubscriptionCanceller & PlanSessions;

function webhookOff(): never {
  throw new Unavailable('Billing is not configured on this server (no STRIPE_SECRET_KEY); the webhook is off.');
}

function plansOff(): never {
  throw new Unavailable('Billing is not configured on this server (no STRIPE_SECRET_KEY).');
}

export const billingOff: Billing = {
  async cancelSubscription() {
    throw new BillingUnavailable();
  },
  assertWebhookOn: webhookOff,
  verifyEvent: webhookOff,
  assertCheckoutOn: plansOff,
  assertPortalOn: plansOff,
  createCheckoutSession: plansOff,
  createPortalSession: plansOff,
};

/** Stripe when a secret key is configured, otherwise billing off (and the stripe package never loaded). */
export async function createBilling(settings: Config['stripe'], logger: Logger): Promise<Billing> {
  if (!settings.secretKey) return billingOff;
  return StripeBilling.create(
    {
      secretKey: settings.secretKey,
      webhookSecret: settings.webhookSecret,
      apiUrl: settings.apiUrl,
      successUrl: settings.successUrl,
      cancelUrl: settings.cancelUrl,
      portalReturnUrl: settings.portalReturnUrl,
    },
    logger,
  );
}

export { STRIPE_DEADLINE_MS, STRIPE_MAX_NETWORK_RETRIES, STRIPE_TIMEOUT_MS } from './stripe.js';
