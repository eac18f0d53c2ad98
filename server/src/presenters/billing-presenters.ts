/** Billing sessions on the wire. */
import type { components } from '../../../spec/generated/openapi.js';

type CheckoutSession = components['schemas']['CheckoutSession'];
type PortalSession = components['schemas']['PortalSession'];

/** A Checkout Session as the contract shows it: Stripe's id and the page to pay on, nothing else of Stripe's answer. */
export function presentCheckoutSession(session: { id: string; url: string }): CheckoutSession {
  return { id: session.id, url: session.url };
}

/** A Customer Portal session: only its page. */
export function presentPortalSession(session: { url: string }): PortalSession {
  return { url: session.url };
}
