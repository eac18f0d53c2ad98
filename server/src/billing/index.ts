/**
 * The billing adapter behind the small interface the domain uses (`SubscriptionCanceller`:
 * cancel a subscription, verify a webhook delivery). With no `STRIPE_SECRET_KEY`, billing is off:
 * nothing calls Stripe, the webhook answers 503, and a project that carries a subscription cannot
 * be deleted (502), since no paying subscription may outlive its project.
 */
import type { Config } from '../config.js';
import type { SubscriptionCanceller } from '../domain/projects.js';
import { BillingUnavailable, Unavailable } from '../errors.js';
import type { Logger } from '../logger.js';
import { StripeBilling } from './stripe.js';

function webhookOff(): never {
  throw new Unavailable('Billing is not configured on this server (no STRIPE_SECRET_KEY); the webhook is off.');
}

export const billingOff: SubscriptionCanceller = {
  async cancelSubscription() {
    throw new BillingUnavailable();
  },
  assertWebhookOn: webhookOff,
  verifyEvent: webhookOff,
};

/** Stripe when a secret key is configured, otherwise billing off (and the stripe package never loaded). */
export async function createBilling(settings: Config['stripe'], logger: Logger): Promise<SubscriptionCanceller> {
  if (!settings.secretKey) return billingOff;
  return StripeBilling.create({ secretKey: settings.secretKey, webhookSecret: settings.webhookSecret, apiUrl: settings.apiUrl }, logger);
}

export { STRIPE_DEADLINE_MS, STRIPE_MAX_NETWORK_RETRIES, STRIPE_TIMEOUT_MS } from './stripe.js';
