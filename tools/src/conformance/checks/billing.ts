/**
 * The Stripe webhook. Without the deployment's webhook secret the suite can only send unsigned or
 * wrongly signed events (400, or 503 when billing is off); with `--stripe-webhook-secret` it signs an
 * event of a type the service ignores (so nothing changes anywhere) and checks it is acknowledged,
 * also when delivered twice. Signatures are Stripe's scheme: `t=<unix time>,v1=<HMAC-SHA256 of
 * "<t>.<body>" with the secret>`.
 *
 * Checkout and portal: their access rules and bad requests, a tier no deployment sells (400, or 503
 * where checkout is not configured) and the portal of a project without a subscription (409, or
 * 503). The suite never starts a real checkout or opens a real portal: that would create sessions
 * in the deployment's Stripe account (see coverage.ts for what that leaves unseen).
 */
import { createHmac } from 'node:crypto';
import type { CaseContext, CaseDef } from '../case.js';
import type { Exchange } from '../http.js';
import {
  ns,
  oneRequest,
  oversizedBody,
  payloadTooLarge,
  sessionOf,
  sessionRequired,
  unauthenticated,
  unsupportedMediaType,
} from './common.js';

const group = 'billing';
const WEBHOOK = 'POST /v1/billing/webhook';
const CHECKOUT = 'POST /v1/projects/{namespace}/billing/checkout';
const PORTAL = 'POST /v1/projects/{namespace}/billing/portal';
/** The largest tier the contract takes: no deployment sells it. */
const UNSOLD_TIER = 2_147_483_647;

const checkoutPath = (t: CaseContext): string => `/v1/projects/${ns(t)}/billing/checkout`;
const portalPath = (t: CaseContext): string => `/v1/projects/${ns(t)}/billing/portal`;

/** Access rules and bad requests of checkout and portal, then the answers that tell whether each is configured. */
const planCases: CaseDef[] = [
  unauthenticated(group, CHECKOUT, checkoutPath, { json: { tier: 1 } }),
  unauthenticated(group, PORTAL, portalPath),
  oneRequest(group, CHECKOUT, '403 not_owner', 'a member who is not the owner may not start a checkout', (t) => ({
    method: 'POST',
    path: checkoutPath(t),
    token: sessionOf('b')(t),
    json: { tier: 1 },
  })),
  oneRequest(group, PORTAL, '403 not_owner', 'a member who is not the owner may not open the billing portal', (t) => ({
    method: 'POST',
    path: portalPath(t),
    token: sessionOf('b')(t),
  })),
  sessionRequired(group, PORTAL, portalPath),
  oneRequest(group, CHECKOUT, '400 invalid_request', 'tier 0 (the free tier) is refused, with details', (t) => ({
    method: 'POST',
    path: checkoutPath(t),
    token: sessionOf('a')(t),
    json: { tier: 0 },
  })),
  oneRequest(group, PORTAL, '400 invalid_request', 'a namespace outside the format is refused', (t) => ({
    method: 'POST',
    path: '/v1/projects/NOT_VALID/billing/portal',
    token: sessionOf('a')(t),
  })),
  unsupportedMediaType(group, CHECKOUT, checkoutPath, sessionOf('a')),
  payloadTooLarge(group, CHECKOUT, checkoutPath, sessionOf('a')),
  {
    group,
    op: CHECKOUT,
    expect: '400 invalid_request (checkout configured) or 503 unavailable (not)',
    title: 'a tier no price is configured for is refused; where billing or checkout is not configured, 503',
    run: async (t) => {
      const exchange = await t.send({ method: 'POST', path: checkoutPath(t), token: sessionOf('a')(t), json: { tier: UNSOLD_TIER } });
      t.state.checkoutOn = exchange.status !== 503;
      if (t.state.checkoutOn) t.expect(exchange, 400, 'invalid_request');
      else {
        t.expect(exchange, 503, 'unavailable');
        t.note('checkout is not configured on this deployment (it answers 503)');
      }
    },
  },
  {
    group,
    op: PORTAL,
    expect: '409 no_subscription (portal configured) or 503 unavailable (not)',
    title: 'the portal of a project without a subscription is refused; where billing or the portal is not configured, 503',
    run: async (t) => {
      const exchange = await t.send({ method: 'POST', path: portalPath(t), token: sessionOf('a')(t) });
      t.state.portalOn = exchange.status !== 503;
      if (t.state.portalOn) t.expect(exchange, 409, 'no_subscription');
      else {
        t.expect(exchange, 503, 'unavailable');
        t.note('the billing portal is not configured on this deployment (it answers 503)');
      }
    },
  },
];

function event(t: CaseContext): string {
  const created = Math.floor(Date.now() / 1000);
  return JSON.stringify({
    id: `evt_conformance_${t.state.tag}`,
    object: 'event',
    type: 'conformance.ping',
    created,
    livemode: false,
    api_version: '2024-06-20',
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    data: { object: { id: `conformance_${t.state.tag}`, object: 'conformance' } },
  });
}

export function stripeSignature(secret: string, body: string, at = Math.floor(Date.now() / 1000)): string {
  return `t=${at},v1=${createHmac('sha256', secret).update(`${at}.${body}`, 'utf8').digest('hex')}`;
}

/** With billing off the webhook answers 503 before it reads a byte of the body, so no body check can be seen. */
function expectUnlessBillingOff(t: CaseContext, exchange: Exchange, status: number, code: string): void {
  if (t.state.billingOn === false) t.expect(exchange, 503, 'unavailable');
  else t.expect(exchange, status, code);
}

export function billingCases(withSecret: boolean): CaseDef[] {
  const cases: CaseDef[] = [
    {
      group,
      op: WEBHOOK,
      expect: '400 invalid_request',
      title: 'an event without a Stripe-Signature header is refused',
      run: async (t) => {
        t.expect(
          await t.send({ method: 'POST', path: '/v1/billing/webhook', raw: { body: event(t), contentType: 'application/json' } }),
          400,
          'invalid_request',
        );
      },
    },
    {
      group,
      op: WEBHOOK,
      expect: '400 (billing on) or 503 unavailable (billing off)',
      title: 'a wrongly signed event is refused: 400 when billing is on, 503 when it is off',
      run: async (t) => {
        const body = event(t);
        const exchange = await t.send({
          method: 'POST',
          path: '/v1/billing/webhook',
          raw: { body, contentType: 'application/json' },
          headers: { 'Stripe-Signature': stripeSignature('whsec_conformance_wrong_secret', body) },
        });
        if (exchange.status === 503) {
          t.expect(exchange, 503, 'unavailable');
          t.state.billingOn = false;
          t.note('billing is off on this deployment (the webhook answers 503)');
        } else {
          t.expect(exchange, 400, 'invalid_request');
          t.state.billingOn = true;
          t.note('billing is on on this deployment (the webhook checks signatures)');
        }
      },
    },
    {
      group,
      op: WEBHOOK,
      expect: '415 unsupported_media_type',
      title: 'a body that is not application/json is refused',
      run: async (t) => {
        const exchange = await t.send({
          method: 'POST',
          path: '/v1/billing/webhook',
          raw: { body: 'conformance=1', contentType: 'text/plain' },
          headers: { 'Stripe-Signature': 't=1,v1=00' },
        });
        expectUnlessBillingOff(t, exchange, 415, 'unsupported_media_type');
      },
    },
    {
      group,
      op: WEBHOOK,
      expect: '413 payload_too_large',
      title: 'a body over 1 MiB is refused',
      run: async (t) => {
        const exchange = await t.send({
          method: 'POST',
          path: '/v1/billing/webhook',
          raw: { body: oversizedBody(), contentType: 'application/json' },
          headers: { 'Stripe-Signature': 't=1,v1=00' },
        });
        expectUnlessBillingOff(t, exchange, 413, 'payload_too_large');
      },
    },
  ];
  cases.push(...planCases);
  if (withSecret) {
    cases.push({
      group,
      op: WEBHOOK,
      expect: '200',
      title: 'a signed event of a type the service ignores is acknowledged, and again when redelivered',
      run: async (t) => {
        t.check(t.state.billingOn !== false, 'a webhook secret was given, but the deployment answers 503: billing is off there');
        const secret = t.options.stripeWebhookSecret!;
        const body = event(t);
        for (let delivery = 1; delivery <= 2; delivery++) {
          const exchange = await t.send({
            method: 'POST',
            path: '/v1/billing/webhook',
            raw: { body, contentType: 'application/json' },
            headers: { 'Stripe-Signature': stripeSignature(secret, body) },
          });
          if (exchange.status === 400)
            throw new Error("the signed event was refused (400): is --stripe-webhook-secret the deployment's STRIPE_WEBHOOK_SECRET?");
          const data = t.expect(exchange, 200);
          t.check(data?.received === true, `delivery ${delivery}: { received: true }`);
        }
      },
    });
  }
  return cases;
}
