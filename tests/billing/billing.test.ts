/**
 * Billing through Stripe. The service's own `stripe` package talks to a local stand-in
 * (support/stripe-stand-in.ts) through STRIPE_API_URL; webhook bodies are signed with the package's
 * own test-header helper. Each test checks what the database holds afterwards, not just the answer.
 *
 * Runs on servers of its own (startExtraServer): one with Stripe configured, one with billing off,
 * both on the run's database settings.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { expect } from 'chai';
import { pino } from 'pino';
import Stripe from 'stripe';
import {
  billingOff,
  createBilling,
  STRIPE_DEADLINE_MS,
  STRIPE_MAX_NETWORK_RETRIES,
  STRIPE_TIMEOUT_MS,
} from '../../server/src/billing/index.js';
import { connectionOptions } from '../../server/src/billing/stripe.js';
import { WEBHOOK_BODY_LIMIT_BYTES } from '../../server/src/handlers/billing-routes.js';
import { ApiError } from '../../server/src/errors.js';
import type { RunningServer } from '../../server/src/server.js';
import { secret, sql, startExtraServer } from '../support/harness.js';
import { signUpOn } from '../support/accounts.js';
import { callAt, expectError, type Answer } from '../support/http.js';
import { namespaceName, rowsOfProject } from '../support/projects.js';
import {
  checkoutCompleted,
  createdAgo,
  deliverEvent,
  newSubscriptionId,
  stripeEvent,
  subscription,
  subscriptionDeleted,
  subscriptionUpdated,
  type Signing,
} from '../support/stripe-events.js';
import { StripeStandIn } from '../support/stripe-stand-in.js';

const API_KEY = secret(`sk_test_${randomBytes(12).toString('hex')}`);
const WEBHOOK_SECRET = secret(`whsec_${randomBytes(16).toString('hex')}`);
const PRICE_TIERS = 'price_basic:1,price_pro:2';

/** A server under test, with the few calls these tests make on it. */
class Target {
  constructor(readonly server: RunningServer) {}

  sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    return sql<T>(text, params, this.server.db);
  }

  call(method: string, path: string, token?: string, body?: unknown): Promise<Answer> {
    return callAt(this.server.url, method, path, token, body);
  }

  /** A project with a second member, an insight and a few activity records: something to keep whole. */
  async project(): Promise<{ id: string; namespace: string; token: string }> {
    const owner = await signUpOn(this.server);
    const member = await signUpOn(this.server);
    const namespace = namespaceName('bill');
    const created = await this.call('POST', '/v1/projects', owner.token, { name: 'Billing test', namespace });
    expect(created.status, created.text).to.equal(201);
    expect((await this.call('POST', `/v1/projects/${namespace}/invites`, owner.token, { username: member.username })).status).to.equal(201);
    expect((await this.call('PUT', `/v1/projects/${namespace}/invites/${member.username}`, member.token)).status).to.equal(200);
    expect((await this.call('POST', `/v1/projects/${namespace}/insights`, owner.token, { title: 'Signups', value: 3 })).status).to.equal(
      201,
    );
    return { id: created.json.data.id, namespace, token: owner.token };
  }

  async billing(projectId: string): Promise<{ tier: number; billing_id: string | null } | undefined> {
    const [row] = await this.sql<{ tier: number; billing_id: string | null }>('select tier, billing_id from projects where id = ?', [
      projectId,
    ]);
    return row;
  }

  async billingActivity(projectId: string): Promise<Record<string, unknown>[]> {
    const rows = await this.sql<{ actor_id: string | null; data: Record<string, unknown> | string }>(
      `select actor_id, data from activity where project_id = ? and type = 'billing.changed' order by id`,
      [projectId],
    );
    return rows.map((row) => ({ actor_id: row.actor_id, ...(typeof row.data === 'string' ? JSON.parse(row.data) : row.data) }));
  }

  footprint(projectId: string): Promise<Record<string, number>> {
    return rowsOfProject(projectId, this.server.db);
  }

  async stripeEvents(): Promise<number> {
    const [row] = await this.sql<{ n: number }>('select count(*)::int as n from stripe_events');
    return row!.n;
  }

  deliver(event: object, signing: Signing = {}): Promise<Answer> {
    return deliverEvent(this.server.url, event, { secret: WEBHOOK_SECRET, ...signing });
  }
}

/**
 * A webhook delivery over raw HTTP: `body` is sent in two writes (chunked unless `contentLength` is
 * given), or not at all when `holdBody` is set, in which case the answer must come while the body
 * is still held back (it is never sent: a server that waits for it gets no answer in 5 s).
 */
function rawDelivery(
  server: RunningServer,
  options: { body?: string; contentLength?: number; holdBody?: boolean; signature?: string; contentType?: string },
): Promise<Answer> {
  const url = new URL(`${server.url}/v1/billing/webhook`);
  const headers: Record<string, string> = {
    'Content-Type': options.contentType ?? 'application/json',
    'Stripe-Signature': options.signature ?? 't=1,v1=00',
  };
  if (options.contentLength !== undefined) headers['Content-Length'] = String(options.contentLength);
  else headers['Transfer-Encoding'] = 'chunked';
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent: false });
    const timer = setTimeout(() => req.destroy(new Error('no answer within 5 s')), 5_000);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        const text = Buffer.concat(chunks).toString('utf8');
        const answerHeaders = new Headers(Object.entries(res.headers).map(([k, v]) => [k, String(v)] as [string, string]));
        resolve({ status: res.statusCode!, headers: answerHeaders, text, json: text ? JSON.parse(text) : undefined });
      });
    });
    if (options.holdBody) req.flushHeaders();
    else {
      const body = Buffer.from(options.body ?? '');
      req.write(body.subarray(0, body.length >> 1));
      req.end(body.subarray(body.length >> 1));
    }
  });
}

/** JSON.parse calls on texts of 10 KiB or more while `work` runs (the server runs in this process). */
async function largeParses(work: () => Promise<Answer>): Promise<{ answer: Answer; parses: number }> {
  const original = JSON.parse;
  let parses = 0;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    if (typeof text === 'string' && text.length >= 10_240) parses += 1;
    return original(text, reviver);
  }) as typeof JSON.parse;
  try {
    return { answer: await work(), parses };
  } finally {
    JSON.parse = original;
  }
}

/** A JSON object of `bytes` bytes (even) that nests as deep as that allows: the costliest kind to parse. */
function nestedBody(bytes: number): string {
  const depth = (bytes - 10) / 2;
  return `{"data":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

/** A Stripe stand-in, and a server of its own whose Stripe settings point at it, with `stripeSecretKey` ('' is billing off). */
async function startBilling(stripeSecretKey: string): Promise<{ standIn: StripeStandIn; target: Target }> {
  const standIn = await StripeStandIn.start(API_KEY);
  const env = {
    STRIPE_SECRET_KEY: stripeSecretKey,
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    STRIPE_PRICE_TIERS: PRICE_TIERS,
    STRIPE_API_URL: standIn.url,
  };
  return { standIn, target: new Target(await startExtraServer({ ...env, ...CLOSES_AT_ONCE })) };
}

function expectReceived(answer: Answer, what = ''): void {
  expect(answer.status, `${what} ${answer.text}`).to.equal(200);
  expect(answer.json).to.deep.equal({ success: true, data: { received: true } });
}

describe('billing through Stripe', function () {
  this.timeout(60_000);
  let standIn: StripeStandIn;
  let target: Target;

  before(async function () {
    this.timeout(120_000);
    ({ standIn, target } = await startBilling(API_KEY));
  });

  after(async () => {
    await target?.server.close();
    await standIn?.close();
  });

  beforeEach(() => standIn.reset());

  /** A project whose billing_id is set the real way: a signed checkout.session.completed. */
  async function subscribedProject(): Promise<{ id: string; namespace: string; token: string; subscription: string }> {
    const project = await target.project();
    const sub = newSubscriptionId();
    expectReceived(await target.deliver(checkoutCompleted(project.id, sub)), 'checkout');
    expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: sub });
    return { ...project, subscription: sub };
  }

  describe('the webhook', () => {
    it('checkout.session.completed sets billing_id, with a billing.changed record by no one', async () => {
      const project = await target.project();
      const sub = newSubscriptionId();
      const event = checkoutCompleted(project.id, sub);
      expectReceived(await target.deliver(event));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: sub });
      expect(await target.billingActivity(project.id)).to.deep.equal([
        { actor_id: null, event: 'checkout.session.completed', event_id: event.id, tier: 0, billing_id: sub },
      ]);
      // Shown to members too.
      const read = await target.call('GET', `/v1/projects/${project.namespace}`, project.token);
      expect(read.json.data).to.include({ tier: 0, billing_id: sub });
      expect(standIn.calls, 'a webhook calls no one').to.deep.equal([]);
    });

    it('customer.subscription.updated sets tier from the price and the status', async () => {
      const project = await subscribedProject();
      const pro = subscriptionUpdated(project.subscription, 'price_pro');
      expectReceived(await target.deliver(pro));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 2, billing_id: project.subscription });

      const basic = subscriptionUpdated(project.subscription, 'price_basic', 'trialing');
      expectReceived(await target.deliver(basic));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: project.subscription });

      const pastDue = subscriptionUpdated(project.subscription, 'price_pro', 'past_due');
      expectReceived(await target.deliver(pastDue));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: project.subscription });

      // An active subscription on a price the configuration does not map pays for no tier.
      expectReceived(await target.deliver(subscriptionUpdated(project.subscription, 'price_pro')));
      const unmapped = subscriptionUpdated(project.subscription, 'price_unknown');
      expectReceived(await target.deliver(unmapped));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: project.subscription });

      const records = await target.billingActivity(project.id);
      expect(records.slice(1, 4)).to.deep.equal([
        { actor_id: null, event: 'customer.subscription.updated', event_id: pro.id, tier: 2, billing_id: project.subscription },
        { actor_id: null, event: 'customer.subscription.updated', event_id: basic.id, tier: 1, billing_id: project.subscription },
        { actor_id: null, event: 'customer.subscription.updated', event_id: pastDue.id, tier: 0, billing_id: project.subscription },
      ]);
      expect(records).to.have.length(6);
    });

    it('an update that changes nothing writes no record', async () => {
      const project = await subscribedProject();
      expectReceived(await target.deliver(subscriptionUpdated(project.subscription, 'price_basic')));
      expectReceived(await target.deliver(subscriptionUpdated(project.subscription, 'price_basic')));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: project.subscription });
      expect(await target.billingActivity(project.id)).to.have.length(2);
    });

    it('customer.subscription.deleted resets tier to 0 and billing_id to null', async () => {
      const project = await subscribedProject();
      expectReceived(await target.deliver(subscriptionUpdated(project.subscription, 'price_pro')));
      const deleted = subscriptionDeleted(project.subscription, 'price_pro');
      expectReceived(await target.deliver(deleted));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      const records = await target.billingActivity(project.id);
      expect(records.at(-1)).to.deep.equal({
        actor_id: null,
        event: 'customer.subscription.deleted',
        event_id: deleted.id,
        tier: 0,
        billing_id: null,
      });
      expect(records).to.have.length(3);
    });

    it('a subscription whose own events come before its checkout: the checkout takes the tier they set', async () => {
      const project = await target.project();
      const sub = newSubscriptionId();
      expectReceived(await target.deliver(stripeEvent('customer.subscription.created', subscription(sub, 'price_pro'))));
      expect(await target.billing(project.id), 'no project has it yet').to.deep.equal({ tier: 0, billing_id: null });
      const checkout = checkoutCompleted(project.id, sub);
      expectReceived(await target.deliver(checkout));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 2, billing_id: sub });
      expect(await target.billingActivity(project.id)).to.deep.equal([
        { actor_id: null, event: 'checkout.session.completed', event_id: checkout.id, tier: 2, billing_id: sub },
      ]);
    });

    it('an update older than one already applied is skipped, whatever order they arrive in', async () => {
      const project = await subscribedProject();
      expectReceived(await target.deliver(createdAgo(subscriptionUpdated(project.subscription, 'price_basic'), 10)));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: project.subscription });
      expectReceived(await target.deliver(createdAgo(subscriptionUpdated(project.subscription, 'price_pro'), 60)));
      expect(await target.billing(project.id), 'the older event changed nothing').to.deep.equal({
        tier: 1,
        billing_id: project.subscription,
      });
      expect(await target.billingActivity(project.id)).to.have.length(2);
    });

    it('a canceled subscription stays canceled: later updates and a late checkout for it change nothing', async () => {
      const project = await target.project();
      const sub = newSubscriptionId();
      expectReceived(await target.deliver(subscriptionDeleted(sub, 'price_pro')));
      expectReceived(await target.deliver(subscriptionUpdated(sub, 'price_pro')));
      expectReceived(await target.deliver(checkoutCompleted(project.id, sub)));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      expect(await target.billingActivity(project.id)).to.deep.equal([]);
    });

    it('acknowledges and ignores unknown projects, unknown subscriptions and other event types', async () => {
      const project = await target.project();
      const before = await target.footprint(project.id);
      const events = [
        checkoutCompleted(randomUUID(), newSubscriptionId()),
        checkoutCompleted('not-a-project-id', newSubscriptionId()),
        stripeEvent('checkout.session.completed', {
          id: 'cs_test_x',
          object: 'checkout.session',
          mode: 'payment',
          client_reference_id: project.id,
          subscription: null,
        }),
        subscriptionUpdated(newSubscriptionId(), 'price_pro'),
        subscriptionDeleted(newSubscriptionId(), 'price_pro'),
        stripeEvent('invoice.paid', { id: 'in_test_x', object: 'invoice' }),
        stripeEvent('customer.subscription.updated', { object: 'subscription' }),
      ];
      for (const event of events) expectReceived(await target.deliver(event), event.type);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      expect(await target.footprint(project.id)).to.deep.equal(before);
      const ids = events.map((e) => e.id);
      const recorded = await target.sql<{ id: string }>(`select id from stripe_events where id in (${ids.map(() => '?').join(', ')})`, ids);
      expect(recorded, 'each is recorded as handled').to.have.length(events.length);
    });

    it('never moves a subscription to a second project', async () => {
      const first = await subscribedProject();
      const second = await target.project();
      expectReceived(await target.deliver(checkoutCompleted(second.id, first.subscription)));
      expect(await target.billing(first.id)).to.deep.equal({ tier: 0, billing_id: first.subscription });
      expect(await target.billing(second.id)).to.deep.equal({ tier: 0, billing_id: null });
      expect(await target.billingActivity(second.id)).to.deep.equal([]);
    });

    it('a second checkout for a project replaces its subscription, cancels the old one at Stripe and records it', async () => {
      const project = await subscribedProject();
      const next = newSubscriptionId();
      const checkout = checkoutCompleted(project.id, next);
      expectReceived(await target.deliver(checkout));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: next });
      expect(standIn.calls.map((c) => `${c.method} ${c.path}`)).to.deep.equal([`DELETE /v1/subscriptions/${project.subscription}`]);
      expect((await target.billingActivity(project.id)).at(-1)).to.deep.equal({
        actor_id: null,
        event: 'checkout.session.completed',
        event_id: checkout.id,
        tier: 0,
        billing_id: next,
        replaced_billing_id: project.subscription,
      });
    });

    it('a second checkout while Stripe fails: 502 billing_unavailable, nothing changed, and the same event applies once Stripe answers', async () => {
      const project = await subscribedProject();
      const checkout = checkoutCompleted(project.id, newSubscriptionId());
      const before = { footprint: await target.footprint(project.id), stripeEvents: await target.stripeEvents() };
      standIn.mode = 'fail';
      expectError(await target.deliver(checkout), 502, 'billing_unavailable');
      expect(standIn.cancelCalls(project.subscription), 'the first try and the retries').to.have.length(1 + STRIPE_MAX_NETWORK_RETRIES);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: project.subscription });
      expect({ footprint: await target.footprint(project.id), stripeEvents: await target.stripeEvents() }).to.deep.equal(before);

      standIn.mode = 'succeed';
      expectReceived(await target.deliver(checkout));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: checkout.data.object.subscription });
      expectReceived(await target.deliver(checkout), 'a redelivery');
      expect(standIn.cancelCalls(project.subscription), 'cancelled once more, then never again').to.have.length(
        2 + STRIPE_MAX_NETWORK_RETRIES,
      );
    });

    describe('refuses a delivery it cannot verify (400, nothing changes)', () => {
      let project: { id: string; namespace: string };
      let event: ReturnType<typeof checkoutCompleted>;
      let before: { footprint: Record<string, number>; stripeEvents: number };

      beforeEach(async () => {
        project = await target.project();
        event = checkoutCompleted(project.id, newSubscriptionId());
        before = { footprint: await target.footprint(project.id), stripeEvents: await target.stripeEvents() };
      });

      afterEach(async () => {
        expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
        expect({ footprint: await target.footprint(project.id), stripeEvents: await target.stripeEvents() }).to.deep.equal(before);
        // The event was not recorded as handled: the genuine delivery still applies.
        expectReceived(await target.deliver(event));
        expect((await target.billing(project.id))?.billing_id).to.equal(event.data.object.subscription);
      });

      it('signed with another secret', async () => {
        expectError(await target.deliver(event, { secret: `whsec_${randomBytes(16).toString('hex')}` }), 400, 'invalid_request');
      });

      it('a valid signature over a different body', async () => {
        const other = Stripe.webhooks.generateTestHeaderString({
          payload: JSON.stringify({ ...event, id: 'evt_other' }),
          secret: WEBHOOK_SECRET,
        });
        expectError(await target.deliver(event, { header: other }), 400, 'invalid_request');
      });

      it('no Stripe-Signature header', async () => {
        expectError(await target.deliver(event, { header: null }), 400, 'invalid_request');
      });

      it('a malformed Stripe-Signature header', async () => {
        expectError(await target.deliver(event, { header: 'not a signature' }), 400, 'invalid_request');
      });

      it('a stale timestamp (signed ten minutes ago)', async () => {
        expectError(await target.deliver(event, { timestamp: Math.floor(Date.now() / 1000) - 600 }), 400, 'invalid_request');
      });
    });

    // Class: work an anonymous sender can cause before the signature is checked. The body is read
    // only up to WEBHOOK_BODY_LIMIT_BYTES and parsed only once its signature holds.
    describe('reads at most 256 KiB and parses nothing before the signature holds', () => {
      it('a bad signature over a large, deeply nested body: 400 without parsing it', async () => {
        const before = await target.stripeEvents();
        const { answer, parses } = await largeParses(() => rawDelivery(target.server, { body: nestedBody(200 * 1024) }));
        expectError(answer, 400, 'invalid_request');
        expect(answer.json.error.details).to.deep.equal([
          { path: '/headers/stripe-signature', message: 'does not match the body, or is too old' },
        ]);
        expect(parses, 'JSON.parse calls on the body').to.equal(0);
        expect(await target.stripeEvents()).to.equal(before);
      });

      it('a body declared past the limit: 413 from Content-Length, before it is sent', async () => {
        const answer = await rawDelivery(target.server, { contentLength: WEBHOOK_BODY_LIMIT_BYTES + 1, holdBody: true });
        expectError(answer, 413, 'payload_too_large');
        expect(answer.json.error.message).to.equal('The body is larger than 256 KiB.');
      });

      it('a chunked body that passes the limit: 413, without parsing it', async () => {
        const { answer, parses } = await largeParses(() => rawDelivery(target.server, { body: nestedBody(WEBHOOK_BODY_LIMIT_BYTES + 2) }));
        expectError(answer, 413, 'payload_too_large');
        expect(parses).to.equal(0);
      });

      it('a body that is not application/json: 415, however well signed', async () => {
        const project = await target.project();
        const body = JSON.stringify(checkoutCompleted(project.id, newSubscriptionId()));
        const signature = Stripe.webhooks.generateTestHeaderString({ payload: body, secret: WEBHOOK_SECRET });
        expectError(await rawDelivery(target.server, { body, signature, contentType: 'text/plain' }), 415, 'unsupported_media_type');
        expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      });

      it('a verified event is held to the rules of every body: a NUL in what it carries is 400 and changes nothing', async () => {
        const project = await target.project();
        const event = checkoutCompleted(project.id, `sub_${randomBytes(4).toString('hex')}\u0000x`);
        const before = await target.stripeEvents();
        const answer = await target.deliver(event);
        expectError(answer, 400, 'invalid_request');
        expect(answer.json.error.details).to.deep.equal([
          { path: '/body/object/subscription', message: 'must not contain NUL characters' },
        ]);
        expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
        expect(await target.stripeEvents()).to.equal(before);
      });
    });

    it('handles each event id at most once: a replay changes nothing', async () => {
      const project = await target.project();
      const sub = newSubscriptionId();
      const checkout = checkoutCompleted(project.id, sub);
      const pro = subscriptionUpdated(sub, 'price_pro');
      const basic = subscriptionUpdated(sub, 'price_basic');
      for (const event of [checkout, pro, basic]) expectReceived(await target.deliver(event));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: sub });

      // The older update, delivered again after a later one.
      expectReceived(await target.deliver(pro));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: sub });

      // The checkout, delivered again after the subscription was deleted.
      const deleted = subscriptionDeleted(sub, 'price_basic');
      expectReceived(await target.deliver(deleted));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
      expectReceived(await target.deliver(checkout));
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });

      // Two deliveries of one event at the same moment: applied once.
      const sub2 = newSubscriptionId();
      const again = checkoutCompleted(project.id, sub2);
      const both = await Promise.all([target.deliver(again), target.deliver(again)]);
      for (const answer of both) expectReceived(answer);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: sub2 });

      expect((await target.billingActivity(project.id)).map((r) => r.event_id)).to.deep.equal([
        checkout.id,
        pro.id,
        basic.id,
        deleted.id,
        again.id,
      ]);
    });
  });

  describe('deleting a project with a subscription', () => {
    it('cancels it through Stripe exactly once, then deletes the project and everything attached', async () => {
      const project = await subscribedProject();
      const answer = await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token);
      expect(answer.status, answer.text).to.equal(204);
      expect(standIn.calls.map((c) => `${c.method} ${c.path}`)).to.deep.equal([`DELETE /v1/subscriptions/${project.subscription}`]);
      expect(standIn.calls[0]!.authorized, 'the configured key was sent').to.equal(true);
      const left = await target.footprint(project.id);
      expect(
        Object.values(left).every((n) => n === 0),
        JSON.stringify(left),
      ).to.equal(true);
    });

    it('deletes a project without a subscription without calling Stripe', async () => {
      const project = await target.project();
      expect((await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token)).status).to.equal(204);
      expect(standIn.calls).to.deep.equal([]);
      expect((await target.footprint(project.id)).projects).to.equal(0);
    });

    it('Stripe failing: 502 billing_unavailable, and the project stays whole', async () => {
      const project = await subscribedProject();
      const before = await target.footprint(project.id);
      standIn.mode = 'fail';
      expectError(await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token), 502, 'billing_unavailable');
      expect(standIn.cancelCalls(project.subscription), 'the first try and the retries').to.have.length(1 + STRIPE_MAX_NETWORK_RETRIES);
      expect(await target.footprint(project.id)).to.deep.equal(before);
      expect(before.project_members).to.equal(2);
      expect(before.feeds).to.be.greaterThan(0);
      expect(before.insights).to.equal(1);
      expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: project.subscription });

      // Once Stripe answers again, the same delete goes through.
      standIn.mode = 'succeed';
      expect((await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token)).status).to.equal(204);
      expect((await target.footprint(project.id)).projects).to.equal(0);
    });

    it('Stripe hanging: 502 within a bounded time, the project whole and the service responsive', async function () {
      this.timeout(STRIPE_DEADLINE_MS + 20_000);
      const project = await subscribedProject();
      const before = await target.footprint(project.id);
      standIn.mode = 'hang';
      const started = performance.now();
      expectError(await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token), 502, 'billing_unavailable');
      const ms = performance.now() - started;
      expect(ms, 'waited for the timeout').to.be.greaterThan(STRIPE_TIMEOUT_MS);
      expect(ms, 'but no longer than the deadline').to.be.lessThan(STRIPE_DEADLINE_MS + 1_000);
      expect(standIn.cancelCalls(project.subscription)).to.have.length(1 + STRIPE_MAX_NETWORK_RETRIES);
      expect(await target.footprint(project.id)).to.deep.equal(before);

      // The row lock (and in embedded mode the connection) was released.
      const quick = performance.now();
      expect((await target.call('GET', `/v1/projects/${project.namespace}`, project.token)).status).to.equal(200);
      expect(performance.now() - quick).to.be.lessThan(2_000);
    });

    it('Stripe saying the subscription is already gone: the delete goes on', async () => {
      const project = await subscribedProject();
      standIn.mode = 'gone';
      expect((await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token)).status).to.equal(204);
      expect(standIn.cancelCalls(project.subscription)).to.have.length(1);
      expect((await target.footprint(project.id)).projects).to.equal(0);
    });

    it('two concurrent deletes: one 204, one 404, exactly one cancel', async () => {
      const project = await subscribedProject();
      standIn.delayMs = 300;
      const answers = await Promise.all([
        target.call('DELETE', `/v1/projects/${project.namespace}`, project.token),
        target.call('DELETE', `/v1/projects/${project.namespace}`, project.token),
      ]);
      expect(answers.map((a) => a.status).sort()).to.deep.equal([204, 404]);
      expectError(
        answers.find((a) => a.status === 404)!,
        404,
        'not_found',
      );
      expect(standIn.cancelCalls()).to.have.length(1);
      expect((await target.footprint(project.id)).projects).to.equal(0);
    });
  });
});

describe('billing off (no STRIPE_SECRET_KEY)', function () {
  this.timeout(60_000);
  let standIn: StripeStandIn;
  let target: Target;

  before(async function () {
    this.timeout(120_000);
    // Everything but the key, pointed at the stand-in: so any call made would be seen.
    ({ standIn, target } = await startBilling(''));
  });

  after(async () => {
    await target?.server.close();
    await standIn?.close();
  });

  it('the webhook answers 503 unavailable, even to a well-signed event, and changes nothing', async () => {
    const project = await target.project();
    const before = { footprint: await target.footprint(project.id), stripeEvents: await target.stripeEvents() };
    const answer = await target.deliver(checkoutCompleted(project.id, newSubscriptionId()));
    expectError(answer, 503, 'unavailable');
    expect(answer.json.error.message).to.match(/not configured/);
    expect(await target.billing(project.id)).to.deep.equal({ tier: 0, billing_id: null });
    expect({ footprint: await target.footprint(project.id), stripeEvents: await target.stripeEvents() }).to.deep.equal(before);
    expect(standIn.calls).to.deep.equal([]);
  });

  // Class: work an anonymous sender can cause on a webhook that is off. The 503 comes before the body is read.
  it('the webhook answers 503 before reading the body: a 1 MiB body held back still gets its answer', async () => {
    const answer = await rawDelivery(target.server, { contentLength: 1024 * 1024, holdBody: true });
    expectError(answer, 503, 'unavailable');
  });

  it('the webhook answers 503 without parsing a 1 MiB deeply nested body', async () => {
    const body = nestedBody(1024 * 1024);
    const { answer, parses } = await largeParses(() => rawDelivery(target.server, { body, contentLength: body.length }));
    expectError(answer, 503, 'unavailable');
    expect(parses, 'JSON.parse calls on the body').to.equal(0);
  });

  it('a project with a subscription cannot be deleted (502) and stays whole; no call is made', async () => {
    const project = await target.project();
    const sub = newSubscriptionId();
    // With billing off no webhook can set it: set by hand, as left over from when billing was on.
    await target.sql('update projects set billing_id = ?, tier = 1 where id = ?', [sub, project.id]);
    const before = await target.footprint(project.id);
    expectError(await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token), 502, 'billing_unavailable');
    expect(await target.footprint(project.id)).to.deep.equal(before);
    expect(await target.billing(project.id)).to.deep.equal({ tier: 1, billing_id: sub });
    expect(standIn.calls).to.deep.equal([]);
  });

  it('a project without a subscription is deleted as usual', async () => {
    const project = await target.project();
    expect((await target.call('DELETE', `/v1/projects/${project.namespace}`, project.token)).status).to.equal(204);
    expect((await target.footprint(project.id)).projects).to.equal(0);
    expect(standIn.calls).to.deep.equal([]);
  });
});

describe('the billing adapter', () => {
  const quiet = pino({ level: 'silent' });
  const settings = {
    secretKey: undefined,
    webhookSecret: undefined,
    priceTiers: new Map<string, number>(),
    apiUrl: 'https://api.stripe.com',
    successUrl: undefined,
    cancelUrl: undefined,
    portalReturnUrl: undefined,
  };

  it('is off without a secret key', async () => {
    expect(await createBilling(settings, quiet)).to.equal(billingOff);
    expect(await createBilling({ ...settings, webhookSecret: WEBHOOK_SECRET }, quiet)).to.equal(billingOff);
  });

  it('with a key but no webhook secret, the webhook answers 503', async () => {
    const billing = await createBilling({ ...settings, secretKey: API_KEY }, quiet);
    const payload = JSON.stringify(stripeEvent('invoice.paid', {}));
    const header = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
    expect(() => billing.assertWebhookOn())
      .to.throw(ApiError)
      .with.property('status', 503);
    expect(() => billing.verifyEvent(Buffer.from(payload), header))
      .to.throw(ApiError)
      .with.property('status', 503);
  });

  it('turns STRIPE_API_URL into the package host, port and protocol', () => {
    expect(connectionOptions('https://api.stripe.com')).to.deep.equal({ host: 'api.stripe.com', port: 443, protocol: 'https' });
    expect(connectionOptions('http://127.0.0.1:12111')).to.deep.equal({ host: '127.0.0.1', port: 12111, protocol: 'http' });
    expect(connectionOptions('http://[::1]:8080')).to.deep.equal({ host: '::1', port: 8080, protocol: 'http' });
    expect(connectionOptions('http://stand-in')).to.deep.equal({ host: 'stand-in', port: 80, protocol: 'http' });
    expect(() => connectionOptions('https://proxy.example.com/stripe')).to.throw(/scheme, host and port only/);
    expect(() => connectionOptions('ftp://example.com')).to.throw(/http or https/);
  });
});
