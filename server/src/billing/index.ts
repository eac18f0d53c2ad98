/**
 * The billing adapter behind a small interface. Until Stripe is wired in (and whenever no key is
 * configured), billing is off: a project that somehow carries a subscription cannot be deleted,
 * since no paying subscription may outlive its project.
 */
import type { SubscriptionCanceller } from '../domain/projects.js';
import { BillingUnavailable } from '../errors.js';

export const billingOff: SubscriptionCanceller = {
  async cancelSubscription() {
    throw new BillingUnavailable();
  },
};
