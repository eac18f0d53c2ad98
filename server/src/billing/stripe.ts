/**
 * Stripe through the `stripe` package, pointed at `STRIPE_API_URL` (Stripe itself, a proxy, or the
 * tests' stand-in).
 *
 * Time budget of a cancel (docs/billing.md, timeouts and retries): each attempt may take
 * STRIPE_TIMEOUT_MS, the package retries once (connection errors, timeouts, 409 and 5xx, after a
 * 0.5 s back-off), so the worst case is about 10.5 s; STRIPE_DEADLINE_MS caps the whole call even
 * if a server trickles bytes and keeps the package's idle timer from firing. The delete holds the
 * project row (and in embedded mode the one database connection) while it waits, and a user waits
 * on it, so a quick 502 "nothing changed, try again" beats a long wait.
 */
import type Stripe from 'stripe';
import type { CheckoutRequest, PlanSessions, SubscriptionCanceller, WebhookEvent } from '../domain/billing.js';
import { BillingUnavailable, InvalidRequest, NoSubscription, Unavailable } from '../errors.js';
import type { Logger } from '../logger.js';

/** Per attempt. Stripe answers a cancel in well under a second; 5 s of silence means trouble. */
export const STRIPE_TIMEOUT_MS = 5_000;
/** One retry: enough for a dropped connection or a one-off 5xx, short enough for a user waiting on a delete. */
export const STRIPE_MAX_NETWORK_RETRIES = 1;
/** The whole call, retries included, whatever the network does. */
export const STRIPE_DEADLINE_MS = 12_000;
/** Oldest webhook signature timestamp accepted, in seconds (Stripe's own default). */
const WEBHOOK_TOLERANCE_S = 300;

export interface StripeSettings {
  secretKey: string;
  webhookSecret: string | undefined;
  /** Where the API is, e.g. `https://api.stripe.com` or `http://127.0.0.1:12111`: scheme, host and port only. */
  apiUrl: string;
  /** Where Checkout returns the browser; unset, checkouts answer 503. */
  successUrl: string | undefined;
  cancelUrl: string | undefined;
  /** Where the portal returns the browser; unset, the portal answers 503. */
  portalReturnUrl: string | undefined;
}

class DeadlineExceeded extends Error {}

function notAnEvent(): InvalidRequest {
  return new InvalidRequest('The body is not a Stripe event with an id, type, created and data.object.', [
    { path: '/body', message: 'is not a Stripe event' },
  ]);
}

/** The package's host, port and protocol settings for an API address. */
export function connectionOptions(apiUrl: string): { host: string; port: number; protocol: 'http' | 'https' } {
  const url = new URL(apiUrl);
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new Error(`STRIPE_API_URL must be an http or https address, got ${url.protocol}`);
  if (url.pathname !== '/' || url.search || url.hash)
    throw new Error('STRIPE_API_URL must name a scheme, host and port only (the stripe package adds /v1/… itself)');
  if (url.username || url.password) throw new Error('STRIPE_API_URL must not carry credentials');
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : protocol === 'https' ? 443 : 80,
    protocol,
  };
}

function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

type StripeErrors = typeof Stripe.errors;

/** Stripe says the subscription does not exist (any more): cancelling it again answers 404 `resource_missing`. */
function isGone(errors: StripeErrors, error: unknown): boolean {
  return error instanceof errors.StripeInvalidRequestError && error.statusCode === 404 && error.code === 'resource_missing';
}

/** What may be logged about a failed call: never the request's headers, which carry the secret key. */
function describe(errors: StripeErrors, error: unknown): Record<string, unknown> {
  if (error instanceof errors.StripeError) {
    return { type: error.type, code: error.code, status: error.statusCode, requestId: error.requestId, message: error.message };
  }
  return { type: error instanceof Error ? error.name : typeof error, message: error instanceof Error ? error.message : String(error) };
}

export class StripeBilling implements SubscriptionCanceller, PlanSessions {
  private readonly stripe: Stripe;
  private readonly errors: StripeErrors;
  private readonly webhookSecret: string | undefined;
  private readonly pages: Pick<StripeSettings, 'successUrl' | 'cancelUrl' | 'portalReturnUrl'>;
  private readonly log: Logger;

  /** The stripe package is a large module: it is loaded here, only when billing is configured. */
  static async create(settings: StripeSettings, logger: Logger): Promise<StripeBilling> {
    const { default: StripeClient } = await import('stripe');
    return new StripeBilling(StripeClient, settings, logger);
  }

  private constructor(StripeClient: typeof Stripe, settings: StripeSettings, logger: Logger) {
    this.errors = StripeClient.errors;
    this.stripe = new StripeClient(settings.secretKey, {
      ...connectionOptions(settings.apiUrl),
      timeout: STRIPE_TIMEOUT_MS,
      maxNetworkRetries: STRIPE_MAX_NETWORK_RETRIES,
      telemetry: false,
      appInfo: { name: 'signalboard' },
    });
    this.webhookSecret = settings.webhookSecret;
    this.pages = { successUrl: settings.successUrl, cancelUrl: settings.cancelUrl, portalReturnUrl: settings.portalReturnUrl };
    this.log = logger.child({ component: 'billing' });
    this.log.info(
      {
        api: settings.apiUrl,
        timeoutMs: STRIPE_TIMEOUT_MS,
        maxNetworkRetries: STRIPE_MAX_NETWORK_RETRIES,
        webhook: Boolean(settings.webhookSecret),
        checkout: Boolean(settings.successUrl && settings.cancelUrl),
        portal: Boolean(settings.portalReturnUrl),
      },
      'stripe billing on',
    );
  }

  /**
   * Runs `work` (one or more calls to Stripe) within STRIPE_DEADLINE_MS. Stripe saying the
   * subscription does not exist is `onGone`'s to answer (or refuse) when given; any other failure
   * is logged and is 502 `billing_unavailable`.
   */
  private async call<T>(what: string, fields: Record<string, unknown>, work: () => Promise<T>, onGone?: () => T): Promise<T> {
    const started = Date.now();
    try {
      const result = await withDeadline(work(), STRIPE_DEADLINE_MS);
      this.log.info({ ...fields, ms: Date.now() - started }, `${what} done`);
      return result;
    } catch (error) {
      if (onGone && isGone(this.errors, error)) {
        this.log.info({ ...fields, ms: Date.now() - started }, `${what}: the subscription is already gone`);
        return onGone();
      }
      this.log.warn({ ...fields, ms: Date.now() - started, error: describe(this.errors, error) }, `${what} failed`);
      throw new BillingUnavailable();
    }
  }

  async cancelSubscription(billingId: string): Promise<void> {
    // Gone (also Stripe's answer for one already canceled) is what a cancel wants.
    await this.call(
      'subscription cancel',
      { subscription: billingId },
      async () => {
        await this.stripe.subscriptions.cancel(billingId);
      },
      () => undefined,
    );
  }

  assertCheckoutOn(): void {
    if (!this.pages.successUrl || !this.pages.cancelUrl)
      throw new Unavailable('Checkout is not configured on this server (STRIPE_SUCCESS_URL and STRIPE_CANCEL_URL).');
  }

  assertPortalOn(): void {
    if (!this.pages.portalReturnUrl)
      throw new Unavailable('The billing portal is not configured on this server (STRIPE_PORTAL_RETURN_URL).');
  }

  async createCheckoutSession({ projectId, price, idempotencyKey }: CheckoutRequest): Promise<{ id: string; url: string }> {
    this.assertCheckoutOn();
    const metadata = { project_id: projectId };
    return this.call('checkout session', { project: projectId, price }, async () => {
      const session = await this.stripe.checkout.sessions.create(
        {
          mode: 'subscription',
          line_items: [{ price, quantity: 1 }],
          client_reference_id: projectId,
          success_url: this.pages.successUrl!,
          cancel_url: this.pages.cancelUrl!,
          metadata,
          subscription_data: { metadata },
        },
        idempotencyKey ? { idempotencyKey } : undefined,
      );
      // A hosted session always has a page; without one the user could not pay.
      if (!session.url) throw new Error(`checkout session ${session.id} has no url`);
      return { id: session.id, url: session.url };
    });
  }

  async createPortalSession(subscriptionId: string, idempotencyKey: string | undefined): Promise<{ url: string }> {
    this.assertPortalOn();
    return this.call(
      'portal session',
      { subscription: subscriptionId },
      async () => {
        // The project keeps only the subscription's id; its customer is Stripe's to say.
        const subscription = await this.stripe.subscriptions.retrieve(subscriptionId);
        const customer = typeof subscription.customer === 'string' ? subscription.customer : subscription.customer.id;
        const session = await this.stripe.billingPortal.sessions.create(
          { customer, return_url: this.pages.portalReturnUrl! },
          idempotencyKey ? { idempotencyKey } : undefined,
        );
        return { url: session.url };
      },
      () => {
        throw new NoSubscription();
      },
    );
  }

  assertWebhookOn(): void {
    if (!this.webhookSecret) throw new Unavailable('The Stripe webhook is not configured on this server (no STRIPE_WEBHOOK_SECRET).');
  }

  /** The signature is checked on the bytes; the package parses them (JSON.parse) only once it holds. */
  verifyEvent(rawBody: Buffer, signature: string): WebhookEvent {
    this.assertWebhookOn();
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(rawBody, signature, this.webhookSecret!, WEBHOOK_TOLERANCE_S);
    } catch (error) {
      // Signed, but not an event the package can read (not JSON, or a thin event).
      if (!(error instanceof this.errors.StripeSignatureVerificationError)) throw notAnEvent();
      this.log.warn({ error: describe(this.errors, error) }, 'webhook signature refused');
      throw new InvalidRequest('The Stripe-Signature header does not sign this body with the configured secret, or is too old.', [
        { path: '/headers/stripe-signature', message: 'does not match the body, or is too old' },
      ]);
    }
    const object = (event as { data?: { object?: unknown } }).data?.object;
    if (
      typeof event.id !== 'string' ||
      typeof event.type !== 'string' ||
      !Number.isInteger(event.created) ||
      typeof object !== 'object' ||
      object === null
    ) {
      throw notAnEvent();
    }
    return { id: event.id, type: event.type, created: event.created, object: object as Record<string, unknown> };
  }
}
