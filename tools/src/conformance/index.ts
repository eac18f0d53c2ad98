/**
 * The black-box conformance suite: `runConformance({ baseUrl, inviteCode })` runs every case against
 * a deployment over HTTP, judges every answer against the contract (contract.ts: the copy the
 * package carries, or spec/generated/openapi.json in the repository), reports coverage of the
 * contract, and cleans up what it created (projects deleted, API tokens revoked, sessions ended)
 * whatever happened in between. It imports nothing of the server.
 *
 * Needs: an invite code with 2 uses left (two accounts: an owner and a second user who is first an
 * outsider, then an invitee, then a member). The run ends by deleting those two accounts
 * (checks/leaving.ts), so nothing of it stays on the deployment.
 */
import { randomBytes } from 'node:crypto';
import { Blocked, CaseContext, INVITE_USES, Ledger, Mismatch, type CaseDef, type RunOptions, type State } from './case.js';
import { selfServiceCases } from './checks/account.js';
import { accountCases } from './checks/accounts.js';
import { billingCases } from './checks/billing.js';
import { conditionalCases } from './checks/conditional.js';
import { emailChangeCases } from './checks/email-change.js';
import { eventQueryCases } from './checks/event-queries.js';
import { feedCases } from './checks/feeds.js';
import { idempotencyCases } from './checks/idempotency.js';
import { insightCases } from './checks/insights.js';
import { passwordResetCases } from './checks/password-reset.js';
import { inviteCases, leaveCases, memberCases } from './checks/invites.js';
import { leavingCases } from './checks/leaving.js';
import { logsnagCases } from './checks/logsnag.js';
import { projectCases, projectDeleteCases, projectMemberCases } from './checks/projects.js';
import { rateLimitCases } from './checks/rate-limits.js';
import { serviceCases } from './checks/service.js';
import { scopeCases } from './checks/scopes.js';
import { sessionCases } from './checks/sessions.js';
import { tokenCases } from './checks/tokens.js';
import { webhookCases, webhookDeleteCases } from './checks/webhooks.js';
import { ContractModel } from './contract.js';
import { computeCoverage, type Coverage } from './coverage.js';
import { Client, TransportError, type Exchange } from './http.js';

export { ContractModel, DEFAULT_CONTRACT_PATH } from './contract.js';
export type { Coverage } from './coverage.js';

export { INVITE_USES } from './case.js';

export interface ConformanceOptions {
  baseUrl: string;
  inviteCode: string;
  /** Also provoke 429 on every operation (see checks/rate-limits.ts for what that spends). */
  rateLimits?: boolean;
  /** The deployment's STRIPE_WEBHOOK_SECRET, to cover the webhook's 200. */
  stripeWebhookSecret?: string;
  /** Another copy of the contract (default: DEFAULT_CONTRACT_PATH, see contract.ts). */
  contractPath?: string;
  /** Per request, default 30 s. */
  timeoutMs?: number;
  /** Progress lines; default: none. */
  log?: (line: string) => void;
}

export interface NonConformance {
  case: string | undefined;
  method: string;
  url: string;
  operation: string | undefined;
  status: number;
  sent: string;
  problems: string[];
}

export interface CaseResult {
  index: number;
  group: string;
  op: string;
  expect: string;
  title: string;
  outcome: 'passed' | 'failed' | 'blocked';
  ms: number;
  failures: string[];
  notes: string[];
  requests: number;
  nonConformance: NonConformance[];
}

export interface CleanupResult {
  ok: boolean;
  done: string[];
  failed: string[];
  /** What the API offers no way to remove. */
  left: string[];
}

export interface ConformanceResult {
  ok: boolean;
  /** Why not ok, one line each. */
  reasons: string[];
  baseUrl: string;
  contract: string;
  startedAt: string;
  durationMs: number;
  options: { rateLimits: boolean; stripeWebhookSecret: boolean; inviteUses: number };
  tag: string;
  cases: CaseResult[];
  counts: {
    total: number;
    passed: number;
    failed: number;
    blocked: number;
    requests: number;
    /** Times the run held a request back for the deployment's rate limits, and for how long in all. */
    waits: number;
    waitedMs: number;
    /** 429 answers to requests that did not ask for one (waited out and sent again, up to three times a request). */
    refusals: number;
    /** Requests counted against this address's sign-in limit (the operations of SIGN_IN_OPERATIONS, pacing.ts). */
    signInRequests: number;
  };
  nonConformance: NonConformance[];
  coverage: Coverage;
  uncoveredOperations: string[];
  cleanup: CleanupResult;
}

export function buildCases(contract: ContractModel, options: { rateLimits: boolean; stripeWebhookSecret: boolean }): CaseDef[] {
  return [
    ...serviceCases,
    ...accountCases,
    ...tokenCases,
    ...projectCases,
    ...inviteCases,
    ...projectMemberCases,
    ...memberCases,
    ...insightCases,
    ...feedCases,
    ...eventQueryCases,
    ...logsnagCases,
    ...webhookCases,
    ...scopeCases(contract),
    ...billingCases(options.stripeWebhookSecret),
    ...idempotencyCases(contract),
    ...conditionalCases(contract),
    ...webhookDeleteCases,
    ...leaveCases,
    ...projectDeleteCases,
    ...selfServiceCases,
    ...sessionCases,
    ...leavingCases,
    ...passwordResetCases,
    ...emailChangeCases,
    ...(options.rateLimits ? rateLimitCases(contract) : []),
  ];
}

function nonConformanceOf(exchange: Exchange, label: string | undefined): NonConformance {
  return {
    case: label,
    method: exchange.method,
    url: exchange.url,
    operation: exchange.operation,
    status: exchange.status,
    sent: exchange.sent,
    problems: exchange.problems,
  };
}

async function cleanUp(client: Client, ledger: Ledger): Promise<CleanupResult> {
  const result: CleanupResult = { ok: true, done: [], failed: [], left: [] };
  const attempt = async (what: string, request: Parameters<Client['send']>[0], fine: number[]) => {
    try {
      const exchange = await client.send(request);
      if (fine.includes(exchange.status)) result.done.push(`${what} (${exchange.status})`);
      else result.failed.push(`${what}: ${exchange.status} ${exchange.json?.error?.code ?? ''}`.trim());
    } catch (error) {
      result.failed.push(`${what}: ${(error as Error).message}`);
    }
  };
  for (const [namespace, session] of ledger.projects) {
    await attempt(`delete project ${namespace}`, { method: 'DELETE', path: `/v1/projects/${namespace}`, token: session }, [204, 404]);
  }
  for (const [id, session] of ledger.tokens) {
    await attempt(`revoke API token ${id}`, { method: 'DELETE', path: `/v1/auth/tokens/${id}`, token: session }, [204, 404]);
  }
  for (const [session, whose] of ledger.sessions) {
    await attempt(`log out the session of ${whose}`, { method: 'DELETE', path: '/v1/auth/logout', token: session }, [204, 401]);
  }
  for (const username of ledger.accounts) result.left.push(`account ${username} (its deletion case did not run to the end)`);
  result.ok = result.failed.length === 0;
  return result;
}

export async function runConformance(options: ConformanceOptions): Promise<ConformanceResult> {
  const started = Date.now();
  const log = options.log ?? (() => {});
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const contract = ContractModel.load(options.contractPath);
  const runOptions: RunOptions = {
    baseUrl,
    inviteCode: options.inviteCode,
    rateLimits: options.rateLimits ?? false,
    stripeWebhookSecret: options.stripeWebhookSecret || undefined,
  };
  const client = new Client({
    baseUrl,
    contract,
    timeoutMs: options.timeoutMs ?? 30_000,
    userAgent: 'signalboard-conformance',
    onWait: (wait) =>
      log(
        `        ${wait.source === 'Retry-After' ? 'a 429 the run did not ask for, on' : 'nothing left of'} ${wait.limit}: waiting ` +
          `${(wait.ms / 1000).toFixed(1)} s as ${wait.source} says`,
      ),
  });
  const tag = `cf${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const password = () => `cf-${randomBytes(12).toString('base64url')}`;
  const state: State = {
    tag,
    a: { username: `${tag}-a`, email: `${tag}-a@example.com`, password: password() },
    b: { username: `${tag}-b`, email: `${tag}-b@example.com`, password: password() },
    events: [],
    notLimited: new Map(),
  };
  const ledger = new Ledger();
  const cases = buildCases(contract, { rateLimits: runOptions.rateLimits, stripeWebhookSecret: Boolean(runOptions.stripeWebhookSecret) });
  const results: CaseResult[] = [];
  const width = String(cases.length).length;
  let cleanup: CleanupResult;
  let unreachable = 0;

  log(`Conformance of ${baseUrl} to ${contract.title} (${contract.operations.length} operations), run ${tag}: ${cases.length} cases`);
  try {
    for (const [index, def] of cases.entries()) {
      const label = `${def.op} ${def.expect}`;
      const result: CaseResult = {
        index: index + 1,
        group: def.group,
        op: def.op,
        expect: def.expect,
        title: def.title,
        outcome: 'passed',
        ms: 0,
        failures: [],
        notes: [],
        requests: 0,
        nonConformance: [],
      };
      const before = client.exchanges.length;
      client.caseIndex = index;
      const t = new CaseContext(client, contract, state, ledger, runOptions);
      const caseStarted = performance.now();
      if (unreachable >= 3) {
        result.outcome = 'blocked';
        result.failures.push('not run: the deployment stopped answering');
      } else if (!def.offContract && !contract.operation(def.op)) {
        result.outcome = 'failed';
        result.failures.push(`the contract has no operation ${def.op}`);
      } else {
        try {
          await def.run(t);
          unreachable = 0;
        } catch (error) {
          if (error instanceof Blocked) {
            result.outcome = 'blocked';
            result.failures.push(`not run: ${error.message}`);
          } else {
            result.outcome = 'failed';
            if (error instanceof TransportError) unreachable += 1;
            else unreachable = 0;
            const exchange = error instanceof Mismatch ? error.exchange : undefined;
            result.failures.push(
              exchange
                ? `${(error as Error).message}\n  request: ${exchange.method} ${exchange.url}${exchange.sent ? ` (${exchange.sent})` : ''}`
                : error instanceof Mismatch || error instanceof TransportError
                  ? error.message
                  : `error in the case: ${String(error)} (${
                      (error as Error).stack
                        ?.split('\n')
                        .find((line) => line.trim().startsWith('at '))
                        ?.trim() ?? 'no stack'
                    })`,
            );
          }
        }
      }
      result.ms = Math.round(performance.now() - caseStarted);
      result.notes = t.notes;
      const mine = client.exchanges.slice(before);
      result.requests = mine.length;
      result.nonConformance = mine.filter((e) => e.problems.length > 0).map((e) => nonConformanceOf(e, label));
      if (result.nonConformance.length > 0 && result.outcome === 'passed') result.outcome = 'failed';
      results.push(result);
      const status = result.outcome === 'passed' ? 'ok' : result.outcome === 'blocked' ? 'BLOCKED' : 'FAILED';
      log(
        `[${String(index + 1).padStart(width)}/${cases.length}] ${label}: ${def.title} … ${status} (${result.ms} ` +
          `ms)${result.notes.length ? ` (${result.notes.join('; ')})` : ''}`,
      );
      for (const failure of result.failures) log(`        ${failure.replace(/\n/g, '\n        ')}`);
      for (const bad of result.nonConformance)
        log(`        not as the contract says: ${bad.method} ${bad.url} → ${bad.status}: ${bad.problems.join('; ')}`);
    }
  } finally {
    client.caseIndex = -1;
    const before = client.exchanges.length;
    cleanup = await cleanUp(client, ledger);
    const bad = client.exchanges.slice(before).filter((e) => e.problems.length > 0);
    if (bad.length)
      cleanup.failed.push(
        ...bad.map((e) => `answer not as the contract says: ${e.method} ${e.url} → ${e.status}: ${e.problems.join('; ')}`),
      );
    cleanup.ok = cleanup.failed.length === 0;
    if (cleanup.done.length || cleanup.failed.length)
      log(
        `Clean-up of what the cases left: ${cleanup.done.length} done${cleanup.failed.length ? `, ${cleanup.failed.length} FAILED` : ''}`,
      );
  }

  const coverage = computeCoverage(contract, client.exchanges, {
    rateLimits: runOptions.rateLimits,
    webhookSecret: Boolean(runOptions.stripeWebhookSecret),
    billingOn: state.billingOn,
    notLimited: state.notLimited,
    portalOn: state.portalOn,
    webhookCapUnreached: state.webhookCapUnreached,
  });
  const nonConformance = client.exchanges
    .filter((e) => e.problems.length > 0)
    .map((e) => nonConformanceOf(e, e.caseIndex >= 0 ? `${cases[e.caseIndex]!.op} ${cases[e.caseIndex]!.expect}` : 'clean-up'));
  const uncoveredOperations = coverage.operations.filter((o) => !o.covered).map((o) => o.key);
  const counts = {
    total: results.length,
    passed: results.filter((r) => r.outcome === 'passed').length,
    failed: results.filter((r) => r.outcome === 'failed').length,
    blocked: results.filter((r) => r.outcome === 'blocked').length,
    requests: client.exchanges.length,
    waits: client.pacer.waits,
    waitedMs: Math.round(client.pacer.waitedMs),
    refusals: client.refusals,
    signInRequests: client.pacer.signInRequests,
  };
  const reasons: string[] = [];
  if (counts.failed) reasons.push(`${counts.failed} case(s) failed`);
  if (counts.blocked) reasons.push(`${counts.blocked} case(s) could not run`);
  if (nonConformance.length) reasons.push(`${nonConformance.length} answer(s) do not match the contract`);
  if (uncoveredOperations.length) reasons.push(`${uncoveredOperations.length} operation(s) of the contract not exercised`);
  if (coverage.gaps) reasons.push(`${coverage.gaps} documented status(es) a client can provoke were not seen`);
  if (!cleanup.ok) reasons.push('the clean-up did not complete');
  return {
    ok: reasons.length === 0,
    reasons,
    baseUrl,
    contract: contract.title,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    options: { rateLimits: runOptions.rateLimits, stripeWebhookSecret: Boolean(runOptions.stripeWebhookSecret), inviteUses: INVITE_USES },
    tag,
    cases: results,
    counts,
    nonConformance,
    coverage,
    uncoveredOperations,
    cleanup,
  };
}
