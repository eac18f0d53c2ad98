/**
 * Coverage of the contract: for each operation, whether a case reached it, and for each documented
 * status whether an answer with it was seen, or why a black-box client cannot provoke it on this
 * run. Anything documented, provokable and not seen is a gap, and fails the run, so a new operation
 * or status added to the contract without a conformance case shows up here.
 */
import type { ContractModel, Operation } from './contract.js';
import type { Exchange } from './http.js';

export type StatusState = 'exercised' | 'not-provokable' | 'gap';

export interface StatusCoverage {
  status: number;
  state: StatusState;
  /** Answers seen with this status. */
  count: number;
  /** Why it cannot be provoked from outside on this run. */
  reason?: string;
}

export interface OperationCoverage {
  operationId: string;
  key: string;
  /** A case reached it with an answer other than 429 (the rate-limit sweep alone does not count). */
  covered: boolean;
  statuses: StatusCoverage[];
}

export interface Coverage {
  operations: OperationCoverage[];
  operationsCovered: number;
  operationsTotal: number;
  statusesExercised: number;
  statusesTotal: number;
  statusesNotProvokable: number;
  gaps: number;
  /** Reasons with the (operation, status) pairs they apply to. */
  notProvokable: { reason: string; pairs: string[] }[];
}

export interface CoverageContext {
  rateLimits: boolean;
  webhookSecret: boolean;
  /** undefined: not found out (the webhook cases did not run to the end). */
  billingOn: boolean | undefined;
  /** Operations that answered a spent credential as usual. */
  notLimited: Map<string, number>;
  /** Whether the billing portal is configured (false: it answered 503); undefined: not found out. */
  portalOn?: boolean | undefined;
  /** The deployment let a project have more webhook endpoints than the contract's 10 (checks/webhooks.ts). */
  webhookCapUnreached?: boolean | undefined;
}

/**
 * Operations whose only 409 is `idempotency_in_progress`. The contract's 409 does not say which codes
 * each operation can answer (one description serves all), so they are named here.
 */
const ONLY_IN_PROGRESS_409 = new Set([
  'publishEvent',
  'publishEvents',
  'updateInsight',
  'logsnagIdentify',
  'updateWebhook',
  'rotateWebhookSecret',
  'testWebhook',
  'recoverWebhook',
]);

/** Why `status` of `op` cannot be provoked from outside on this run; undefined when it can. */
export function notProvokableReason(op: Operation, status: number, context: CoverageContext): string | undefined {
  if (status === 500) return '500 `internal` is the answer to a failure inside the service: a black-box client cannot cause one on purpose';
  if (status === 503) {
    if (op.caller === 'stripe') {
      if (context.billingOn === false) return undefined;
      return (
        "503 is the webhook's answer when billing is not configured, and this deployment has billing on (503 `unavailable` for a " +
        'database outage needs the database down)'
      );
    }
    return '503 `unavailable` needs the database (or the process) to be down';
  }
  if (status === 429) {
    if (!context.rateLimits)
      return (
        '429 needs the rate limits spent: run with --rate-limits (spends a throwaway credential and, for a minute, this address’s ' +
        'sign-up/login limit)'
      );
    if (context.notLimited.has(op.key))
      return (
        'this deployment does not rate-limit it: a spent credential got its usual answer (the README exempts health checks and the ' +
        'webhook)'
      );
    return undefined;
  }
  if (status === 409 && (op.key === 'POST /v1/auth/tokens' || op.key === 'POST /v1/projects/{namespace}/insights')) {
    return (
      "409 `limit_reached` needs the user's API tokens or the project's insights filled to the deployment's cap; a conformance run " +
      'does not fill them'
    );
  }
  if (status === 409 && ['logsnagLog', 'logsnagSetInsight', 'logsnagIncrementInsight'].includes(op.operationId)) {
    return (
      "409 `limit_reached` needs the project's feeds (for a new channel) or insights (for a new title) filled to the deployment's " +
      'cap, which a conformance run does not fill; `idempotency_in_progress` needs two requests with one key at once'
    );
  }
  if (status === 409 && op.operationId === 'retryWebhookDelivery') {
    return (
      "409 `event_expired` needs a delivery whose event the deployment's retention (or its feed's delete) has since removed, which " +
      'takes the retention period to pass; `idempotency_in_progress` needs two requests with one key at once'
    );
  }
  if (status === 409 && op.operationId === 'createWebhook' && context.webhookCapUnreached) {
    return (
      "409 `limit_reached` needs the project's webhook endpoints filled to the deployment's cap, which this deployment sets above " +
      'the 10 a conformance run fills'
    );
  }
  if (status === 409 && op.key === 'PUT /v1/projects/{namespace}/owner') {
    return (
      "409 `limit_reached` needs the new owner to own as many projects as the deployment's cap allows; a conformance run does not " +
      'fill it'
    );
  }
  if (status === 409 && ONLY_IN_PROGRESS_409.has(op.operationId)) {
    return (
      '409 `idempotency_in_progress` (its only 409 here) needs a second request with an Idempotency-Key while the first with that ' +
      'key is still being handled; from outside that is a race between two requests, not something a client can cause at will'
    );
  }
  if (status === 204 && op.operationId === 'confirmPasswordReset') {
    return "204 needs a live password reset token, which only the account's mail or the deployment's operator gets";
  }
  if ((status === 204 || status === 409) && op.operationId === 'confirmEmailChange') {
    return (
      '204, and 409 `email_taken` (the new address taken meanwhile), need a live e-mail change token (`emc_…`), which only the ' +
      "new address's mail or the deployment's operator gets"
    );
  }
  if ((status === 204 || status === 409) && op.operationId === 'revertEmailChange') {
    return (
      "204, and 409 `email_taken` (the old address taken since), need a live undo token (`emr_…`), which only the old address's " +
      'mail gets, after a confirmed change'
    );
  }
  const plans = planReason(op, status, context);
  if (plans) return plans;
  if (status === 502 && op.caller === 'stripe')
    return (
      '502 `billing_unavailable` needs a second paid checkout for a project that has a subscription, and Stripe failing the old ' +
      "one's cancel"
    );
  if (status === 502)
    return (
      '502 `billing_unavailable` needs a project with a Stripe subscription (only a Stripe checkout sets billing_id) and Stripe ' +
      'failing when it is deleted'
    );
  if (op.caller === 'stripe' && (status === 413 || status === 415) && context.billingOn === false) {
    return 'billing is off on this deployment: the webhook answers 503 before it reads the body';
  }
  if (op.caller === 'stripe' && status === 200) {
    if (!context.webhookSecret) return "200 needs an event signed with the deployment's webhook secret: pass --stripe-webhook-secret";
    if (context.billingOn === false) return 'billing is off on this deployment: the webhook answers 503 to every event';
  }
  return undefined;
}

/** Checkout and portal: what the suite leaves unseen because it never creates sessions in the deployment's Stripe account. */
function planReason(op: Operation, status: number, context: CoverageContext): string | undefined {
  const checkout = op.operationId === 'createCheckoutSession';
  if (!checkout && op.operationId !== 'createPortalSession') return undefined;
  if (status === 502)
    return '502 `billing_unavailable` needs Stripe to fail while a checkout or portal session is created; a client cannot make it fail';
  if (status === 201 && checkout)
    return (
      '201 creates a Checkout Session in the deployment’s Stripe account for a tier it sells; the suite creates nothing outside ' +
      'the service'
    );
  if (status === 201)
    return '201 needs a project with a Stripe subscription, which only a checkout paid through Stripe gives; the suite pays for none';
  if (status === 409 && checkout)
    return (
      '409 `already_subscribed` needs a project with a Stripe subscription (a paid checkout), and `idempotency_in_progress` two ' +
      'requests with one key at once'
    );
  if (status === 409 && context.portalOn === false)
    return 'the billing portal is not configured on this deployment: it answers 503 before it looks for a subscription';
  return undefined;
}

export function computeCoverage(contract: ContractModel, exchanges: Exchange[], context: CoverageContext): Coverage {
  const seen = new Map<string, Map<number, number>>();
  for (const exchange of exchanges) {
    if (!exchange.operation) continue;
    let statuses = seen.get(exchange.operation);
    if (!statuses) seen.set(exchange.operation, (statuses = new Map()));
    statuses.set(exchange.status, (statuses.get(exchange.status) ?? 0) + 1);
  }
  const reasons = new Map<string, string[]>();
  const operations = contract.operations.map((op): OperationCoverage => {
    const observed = seen.get(op.key) ?? new Map<number, number>();
    const statuses = op.statuses.map((status): StatusCoverage => {
      const count = observed.get(status) ?? 0;
      if (count > 0) return { status, state: 'exercised', count };
      const reason = notProvokableReason(op, status, context);
      if (reason) {
        const pairs = reasons.get(reason) ?? [];
        pairs.push(`${op.key} ${status}`);
        reasons.set(reason, pairs);
        return { status, state: 'not-provokable', count, reason };
      }
      return { status, state: 'gap', count };
    });
    const covered = [...observed.keys()].some((status) => status !== 429);
    return { operationId: op.operationId, key: op.key, covered, statuses };
  });
  const all = operations.flatMap((o) => o.statuses);
  return {
    operations,
    operationsCovered: operations.filter((o) => o.covered).length,
    operationsTotal: operations.length,
    statusesExercised: all.filter((s) => s.state === 'exercised').length,
    statusesTotal: all.length,
    statusesNotProvokable: all.filter((s) => s.state === 'not-provokable').length,
    gaps: all.filter((s) => s.state === 'gap').length,
    notProvokable: [...reasons.entries()].map(([reason, pairs]) => ({ reason, pairs })),
  };
}
