/**
 * Starting and managing a plan: `POST /v1/projects/{namespace}/billing/checkout` and `/billing/portal`.
 * The service's own `stripe` package talks to the local stand-in (support/stripe-stand-in.ts), which
 * records what each create was asked for; webhook events are signed with the package's own helper.
 * Each test checks what Stripe was (or was not) asked, and what the database holds afterwards.
 *
 * Runs on servers of its own (startExtraServer): one with Stripe configured, one with billing off.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { pino } from 'pino';
import { createBilling } from '../../server/src/billing/index.js';
import { STRIPE_DEADLINE_MS, STRIPE_MAX_NETWORK_RETRIES, STRIPE_TIMEOUT_MS } from '../../server/src/billing/stripe.js';
import { ConfigError, loadConfig } from '../../server/src/config.js';
import { ApiError } from '../../server/src/errors.js';
import type { RunningServer } from '../../server/src/server.js';
import { secret, sql, startExtraServer } from '../support/harness.js';
import { signUpOn, type TestUser } from '../support/accounts.js';
import { callAt, expectError, type Answer } from '../support/http.js';
import { namespaceName } from '../support/projects.js';
import {
  checkoutCompleted,
  deliverEvent,
  newSubscriptionId,
  stripeEvent,
  subscription,
  subscriptionUpdated,
} from '../support/stripe-events.js';
import { formOf, StripeStandIn } from '../support/stripe-stand-in.js';

const API_KEY = secret(`sk_test_${randomBytes(12).toString('hex')}`);
const WEBHOOK_SECRET = secret(`whsec_${randomBytes(16).toString('hex')}`);
// Two prices for tier 2: a checkout uses the first listed.
const PRICE_TIERS = 'price_basic:1,price_pro:2,price_pro_yearly:2';
const SUCCESS_URL = 'https://app.example.com/billing/done?session={CHECKOUT_SESSION_ID}';
const CANCEL_URL = 'https://app.example.com/billing/';
const PORTAL_RETURN_URL = 'https://app.example.com/settings/billing';

interface Owned {
  id: string;
  namespace: string;
  owner: TestUser;
  member: TestUser;
}

/** A server under test and its stand-in. */
class Target {
  constructor(
    readonly server: RunningServer,
    readonly standIn: StripeStandIn,
  ) {}

  call(method: string, path: string, token?: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    return callAt(this.server.url, method, path, token, body, headers);
  }

  checkout(project: Owned, body: unknown, token = project.owner.token, headers: Record<string, string> = {}): Promise<Answer> {
    return this.call('POST', `/v1/projects/${project.namespace}/billing/checkout`, token, body, headers);
  }

  portal(project: Owned, token = project.owner.token, headers: Record<string, string> = {}): Promise<Answer> {
    return this.call('POST', `/v1/projects/${project.namespace}/billing/portal`, token, undefined, headers);
  }

  /** A project with its owner and one other member. */
  async project(): Promise<Owned> {
    const [owner, member] = await Promise.all([signUpOn(this.server), signUpOn(this.server)]);
    const namespace = namespaceName('pay');
    const created = await this.call('POST', '/v1/projects', owner.token, { name: 'Checkout test', namespace });
    expect(created.status, created.text).to.equal(201);
    expect((await this.call('POST', `/v1/projects/${namespace}/invites`, owner.token, { username: member.username })).status).to.equal(201);
    expect((await this.call('PUT', `/v1/projects/${namespace}/invites/${member.username}`, member.token)).status).to.equal(200);
    return { id: created.json.data.id, namespace, owner: owner, member: member };
  }

  deliver(event: object): Promise<Answer> {
    return deliverEvent(this.server.url, event, { secret: WEBHOOK_SECRET });
  }

  /** A project subscribed the way Stripe reports it: a completed checkout, then its subscription's first event. */
  async subscribed(price = 'price_basic'): Promise<Owned & { subscription: string }> {
    const project = await this.project();
    const sub = newSubscriptionId();
    expectReceived(await this.deliver(checkoutCompleted(project.id, sub)));
    expectReceived(await this.deliver(subscriptionUpdated(sub, price)));
    expect(await this.billing(project.id)).to.deep.equal({ tier: price === 'price_basic' ? 1 : 2, billing_id: sub });
    return { ...project, subscription: sub };
  }

  async billing(projectId: string): Promise<{ tier: number; billing_id: string | null }> {
    const [row] = await sql<{ tier: number; billing_id: string | null }>(
      'select tier, billing_id from projects where id = ?',
      [projectId],
      this.server.db,
    );
    return row!;
  }

  async billingActivity(projectId: string): Promise<number> {
    const [row] = await sql<{ n: number }>(
      `select count(*)::int as n from activity where project_id = ? and type = 'billing.changed'`,
      [projectId],
      this.server.db,
    );
    return row!.n;
  }

  async close(): Promise<void> {
    await this.server.close();
    await this.standIn.close();
  }
}

function expectReceived(answer: Answer): void {
  expect(answer.status, answer.text).to.equal(200);
}

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

async function startTarget(env: Record<string, string>): Promise<Target> {
  const standIn = await StripeStandIn.start(API_KEY);
  const server = await startExtraServer({
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    STRIPE_PRICE_TIERS: PRICE_TIERS,
    STRIPE_API_URL: standIn.url,
    STRIPE_SUCCESS_URL: SUCCESS_URL,
    STRIPE_CANCEL_URL: CANCEL_URL,
    STRIPE_PORTAL_RETURN_URL: PORTAL_RETURN_URL,
    ...CLOSES_AT_ONCE,
    ...env,
  });
  return new Target(server, standIn);
}

describe('starting and managing a plan', function () {
  this.timeout(60_000);
  let target: Target;
  let standIn: StripeStandIn;

  before(async function () {
    this.timeout(120_000);
    target = await startTarget({ STRIPE_SECRET_KEY: API_KEY });
    standIn = target.standIn;
  });

  after(async () => {
    await target?.close();
  });

  beforeEach(() => standIn.reset());

  describe('checkout', () => {
    it("the owner gets the stand-in's session; Stripe was asked for the tier's price, the project and the configured pages", async () => {
      const project = await target.project();
      const answer = await target.checkout(project, { tier: 2 });
      expect(answer.status, answer.text).to.equal(201);
      expect(standIn.checkoutSessions).to.have.length(1);
      const session = standIn.checkoutSessions[0]!;
      expect(answer.json).to.deep.equal({ success: true, data: { id: session.id, url: session.url } });
      expect(session.form).to.deep.equal({
        mode: 'subscription',
        'line_items[0][price]': 'price_pro',
        'line_items[0][quantity]': '1',
        client_reference_id: project.id,
        success_url: SUCCESS_URL,
        cancel_url: CANCEL_URL,
        'metadata[project_id]': project.id,
        'subscription_data[metadata][project_id]': project.id,
      });
      expect(standIn.calls.map((c) => `${c.method} ${c.path} ${c.authorized}`)).to.deep.equal(['POST /v1/checkout/sessions true']);
      // Nothing changes until Stripe reports the completed checkout.
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      expect(await target.billingActivity(project.id)).to.equal(0);
    });

    it("the owner's API token may start one too", async () => {
      const project = await target.project();
      const token = await target.call('POST', '/v1/auth/tokens', project.owner.token, { name: 'billing script' });
      expect(token.status, token.text).to.equal(201);
      const answer = await target.checkout(project, { tier: 1 }, secret(token.json.data.token as string));
      expect(answer.status, answer.text).to.equal(201);
      expect(standIn.checkoutSessions.map((s) => s.form['line_items[0][price]'])).to.deep.equal(['price_basic']);
    });

    it('a member: 403 not_owner; a non-member: 404; no call to Stripe', async () => {
      const project = await target.project();
      expectError(await target.checkout(project, { tier: 1 }, project.member.token), 403, 'not_owner');
      const outsider = await signUpOn(target.server);
      expectError(await target.checkout(project, { tier: 1 }, outsider.token), 404, 'not_found');
      expect(standIn.calls).to.deep.equal([]);
    });

    it('a tier no price maps to: 400 with the field named; tier 0 and a missing tier: 400; no call to Stripe', async () => {
      const project = await target.project();
      const unknown = await target.checkout(project, { tier: 3 });
      expectError(unknown, 400, 'invalid_request');
      expect(unknown.json.error.details).to.deep.equal([{ path: '/body/tier', message: 'no Stripe price is configured for this tier' }]);
      for (const body of [{ tier: 0 }, {}, { tier: '2' }, { tier: 1, price: 'price_pro' }]) {
        expectError(await target.checkout(project, body), 400, 'invalid_request', JSON.stringify(body));
      }
      expect(standIn.calls).to.deep.equal([]);
    });

    it('a project that already has a subscription: 409 already_subscribed, no call to Stripe', async () => {
      const project = await target.subscribed();
      expectError(await target.checkout(project, { tier: 2 }), 409, 'already_subscribed');
      expect(standIn.calls).to.deep.equal([]);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: project.subscription });
    });

    it('a retried request with the same Idempotency-Key: one session, the first answer replayed', async () => {
      const project = await target.project();
      const key = randomUUID();
      const first = await target.checkout(project, { tier: 1 }, undefined, { 'Idempotency-Key': key });
      expect(first.status, first.text).to.equal(201);
      const again = await target.checkout(project, { tier: 1 }, undefined, { 'Idempotency-Key': key });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.json).to.deep.equal(first.json);
      expect(standIn.checkoutCalls()).to.have.length(1);
      // Stripe gets a key of its own, derived from the request's and not showing it.
      const sent = standIn.checkoutCalls()[0]!.idempotencyKey!;
      expect(sent).to.match(/^signalboard-checkout-[0-9a-f]{64}$/);
      expect(sent).not.to.include(key);
    });

    it('Stripe failing: 502 billing_unavailable and nothing recorded; the retry with the same key sends Stripe the same key', async () => {
      const project = await target.project();
      const key = randomUUID();
      standIn.mode = 'fail';
      expectError(await target.checkout(project, { tier: 2 }, undefined, { 'Idempotency-Key': key }), 502, 'billing_unavailable');
      expect(standIn.checkoutCalls(), 'the first try and the retries').to.have.length(1 + STRIPE_MAX_NETWORK_RETRIES);
      expect(standIn.checkoutSessions).to.deep.equal([]);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      expect(await target.billingActivity(project.id)).to.equal(0);

      // The 502 did not use the key up: the retry does the work, under the same key at Stripe.
      standIn.mode = 'succeed';
      const retried = await target.checkout(project, { tier: 2 }, undefined, { 'Idempotency-Key': key });
      expect(retried.status, retried.text).to.equal(201);
      expect(retried.headers.get('idempotent-replayed')).to.equal(null);
      expect(new Set(standIn.checkoutCalls().map((c) => c.idempotencyKey)).size).to.equal(1);
      expect(standIn.checkoutSessions).to.have.length(1);
    });

    it('Stripe hanging: 502 within the deadline', async function () {
      this.timeout(STRIPE_DEADLINE_MS + 20_000);
      const project = await target.project();
      standIn.mode = 'hang';
      const started = performance.now();
      expectError(await target.checkout(project, { tier: 1 }), 502, 'billing_unavailable');
      const ms = performance.now() - started;
      expect(ms, 'waited for the timeout').to.be.greaterThan(STRIPE_TIMEOUT_MS);
      expect(ms, 'but no longer than the deadline').to.be.lessThan(STRIPE_DEADLINE_MS + 1_000);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
    });
  });

  describe('portal', () => {
    it("the owner gets the stand-in's portal page for the subscription's customer, returning to the configured page", async () => {
      const project = await target.subscribed();
      const answer = await target.portal(project);
      expect(answer.status, answer.text).to.equal(201);
      expect(standIn.portalSessions).to.have.length(1);
      expect(answer.json).to.deep.equal({ success: true, data: { url: standIn.portalSessions[0]!.url } });
      expect(standIn.calls.map((c) => `${c.method} ${c.path}`)).to.deep.equal([
        `GET /v1/subscriptions/${project.subscription}`,
        'POST /v1/billing_portal/sessions',
      ]);
      expect(standIn.portalSessions[0]!.form).to.deep.equal({ customer: `cus_for_${project.subscription}`, return_url: PORTAL_RETURN_URL });
    });

    it('a project without a subscription: 409 no_subscription, no call to Stripe', async () => {
      const project = await target.project();
      expectError(await target.portal(project), 409, 'no_subscription');
      expect(standIn.calls).to.deep.equal([]);
    });

    it('a subscription Stripe no longer knows: 409 no_subscription', async () => {
      const project = await target.subscribed();
      standIn.mode = 'gone';
      expectError(await target.portal(project), 409, 'no_subscription');
      expect(standIn.portalCalls()).to.deep.equal([]);
    });

    it('a member: 403 not_owner; an API token of the owner: 403 session_required; a non-member: 404', async () => {
      const project = await target.subscribed();
      expectError(await target.portal(project, project.member.token), 403, 'not_owner');
      const token = await target.call('POST', '/v1/auth/tokens', project.owner.token, { name: 'billing script' });
      expectError(await target.portal(project, secret(token.json.data.token as string)), 403, 'session_required');
      expectError(await target.portal(project, (await signUpOn(target.server)).token), 404, 'not_found');
      expect(standIn.calls).to.deep.equal([]);
    });

    it('Stripe failing: 502 billing_unavailable', async () => {
      const project = await target.subscribed();
      standIn.mode = 'fail';
      expectError(await target.portal(project), 502, 'billing_unavailable');
      expect(standIn.portalSessions).to.deep.equal([]);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: project.subscription });
    });
  });

  it("the whole loop: checkout, Stripe's events for it, and the project's tier follows; then the portal, not a second checkout", async () => {
    const project = await target.project();
    const started = await target.checkout(project, { tier: 2 });
    expect(started.status, started.text).to.equal(201);
    const asked = formOf(standIn.checkoutCalls()[0]!);

    // What Stripe sends once the user has paid: the checkout carries what the session was created
    // with, and the subscription it made is for the price the session asked for.
    const sub = newSubscriptionId();
    const completed = stripeEvent('checkout.session.completed', {
      id: started.json.data.id,
      object: 'checkout.session',
      mode: 'subscription',
      status: 'complete',
      client_reference_id: asked.client_reference_id,
      metadata: { project_id: asked['metadata[project_id]'] },
      subscription: sub,
      customer: `cus_for_${sub}`,
    });
    expectReceived(await target.deliver(stripeEvent('customer.subscription.created', subscription(sub, asked['line_items[0][price]']!))));
    expectReceived(await target.deliver(completed));
    expect(await target.billing(project.id)).to.deep.equal({ tier: 2, billing_id: sub });
    expect(await target.billingActivity(project.id)).to.equal(1);

    expectError(await target.checkout(project, { tier: 1 }), 409, 'already_subscribed');
    expect((await target.portal(project)).status).to.equal(201);
  });
});

describe('starting and managing a plan with billing off (no STRIPE_SECRET_KEY)', function () {
  this.timeout(60_000);
  let target: Target;

  before(async function () {
    this.timeout(120_000);
    // Everything but the key, pointed at the stand-in: so any call made would be seen.
    target = await startTarget({ STRIPE_SECRET_KEY: '' });
  });

  after(async () => {
    await target?.close();
  });

  it('checkout and portal answer 503 unavailable to the owner, after the access check; nothing calls Stripe', async () => {
    const project = await target.project();
    for (const answer of [await target.checkout(project, { tier: 1 }), await target.portal(project)]) {
      expectError(answer, 503, 'unavailable');
      expect(answer.json.error.message).to.match(/not configured/);
    }
    expectError(await target.checkout(project, { tier: 1 }, project.member.token), 403, 'not_owner');
    expect(target.standIn.calls).to.deep.equal([]);
    expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
  });
});

describe('the settings of checkout and portal', () => {
  const quiet = pino({ level: 'silent' });
  const base = {
    secretKey: API_KEY,
    webhookSecret: undefined,
    priceTiers: new Map([['price_basic', 1]]),
    apiUrl: 'https://api.stripe.com',
    successUrl: SUCCESS_URL,
    cancelUrl: CANCEL_URL,
    portalReturnUrl: PORTAL_RETURN_URL,
  };

  it('with a key but without the pages, checkout or portal answers 503', async () => {
    for (const missing of ['successUrl', 'cancelUrl'] as const) {
      const billing = await createBilling({ ...base, [missing]: undefined }, quiet);
      expect(() => billing.assertCheckoutOn(), missing)
        .to.throw(ApiError)
        .with.property('status', 503);
      expect(() => billing.assertPortalOn()).not.to.throw();
    }
    const billing = await createBilling({ ...base, portalReturnUrl: undefined }, quiet);
    expect(() => billing.assertPortalOn())
      .to.throw(ApiError)
      .with.property('status', 503);
    expect(() => billing.assertCheckoutOn()).not.to.throw();
  });

  it('the pages must be http or https addresses, and are kept as given', () => {
    for (const name of ['STRIPE_SUCCESS_URL', 'STRIPE_CANCEL_URL', 'STRIPE_PORTAL_RETURN_URL']) {
      for (const value of ['not a url', 'ftp://example.com/done', 'javascript:alert(1)']) {
        expect(() => loadConfig({ [name]: value }), `${name}=${value}`).to.throw(ConfigError, name);
      }
    }
    const config = loadConfig({ STRIPE_SUCCESS_URL: SUCCESS_URL, STRIPE_CANCEL_URL: CANCEL_URL });
    expect(config.stripe).to.include({ successUrl: SUCCESS_URL, cancelUrl: CANCEL_URL, portalReturnUrl: undefined });
  });
});
