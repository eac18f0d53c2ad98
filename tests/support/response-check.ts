/**
 * The suite-wide contract check: every answer the tests get from the service is judged by the
 * conformance package's judge (tools/src/conformance/contract.ts, `ContractModel.judge`: routing,
 * documented statuses, headers and their bounds, content types, bodies against the schemas with
 * openapi-response-validator, error codes the response's description names), the very judge the
 * black-box suite applies to a deployment. Nothing of the server's own contract code takes part.
 *
 * `installResponseCheck()` wraps `globalThis.fetch`: answers from a local service (127.0.0.1,
 * localhost or [::1], a path under /v1, /healthz or /readyz, and the service's own X-Request-Id
 * header, or the run's base URL) are judged in the background on a clone of the response, so the
 * caller's body is neither consumed nor delayed. Only `application/json` bodies are cloned and read;
 * any other answer (an event stream) is judged on its status, headers and content type. Raw
 * `node:http` requests are out of its reach: the fuzzer hands its answers to `recordAnswer()`.
 */
import { ContractModel, type AnswerToJudge } from '../../tools/src/conformance/contract.js';

export interface Violation {
  method: string;
  /** Path and query as sent, cut to 300 characters. */
  url: string;
  /** The operation's `METHOD /template`, or the method and path when no operation has the path. */
  route: string;
  status: number;
  error: string;
  note?: string;
}

export interface RecordedAnswer extends Omit<AnswerToJudge, 'path'> {
  /** Path and query as sent. */
  url: string;
  /** What was sent, for the report (the fuzzer describes its case here). */
  note?: string;
}

let contract: ContractModel | undefined;

/** The contract as the conformance package reads it (spec/generated/openapi.json, from source). */
export function contractModel(): ContractModel {
  contract ??= ContractModel.load();
  return contract;
}

let originalFetch: typeof fetch | undefined;
const pending = new Set<Promise<void>>();
const violations: Violation[] = [];
let judged = 0;
let knownOrigins: () => string[] = () => [];

function routeOf(method: string, path: string): string {
  const routed = contractModel().route(method, path);
  if (routed.kind === 'operation') return routed.op.key;
  return `${method} ${path.length > 80 ? `${path.slice(0, 80)}…` : path}`;
}

/** Judges one answer, counts it and keeps its violations for the end of the run; answers the violations. */
export function recordAnswer(answer: RecordedAnswer): string[] {
  judged += 1;
  const method = answer.method.toUpperCase();
  const path = answer.url.split('?')[0]!;
  const problems = contractModel().judge({ ...answer, method, path });
  if (problems.length && answer.headers.get('x-request-id') === null)
    problems.push("no X-Request-Id: answered below the service (by Node's HTTP parser?)");
  const route = problems.length ? routeOf(method, path) : '';
  for (const error of problems) {
    violations.push({
      method,
      url: answer.url.slice(0, 300),
      route,
      status: answer.status,
      error,
      ...(answer.note ? { note: answer.note } : {}),
    });
  }
  return problems;
}

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const SERVICE_PATH = /^\/(v1|healthz|readyz)/;

function requestOf(input: Parameters<typeof fetch>[0], init: Parameters<typeof fetch>[1]): { method: string; url: URL } | undefined {
  try {
    if (input instanceof Request) return { method: (init?.method ?? input.method).toUpperCase(), url: new URL(input.url) };
    return { method: (init?.method ?? 'GET').toUpperCase(), url: new URL(String(input)) };
  } catch {
    return undefined;
  }
}

function originsNow(): string[] {
  try {
    return knownOrigins();
  } catch {
    return [];
  }
}

/** Wraps globalThis.fetch; `origins` names the servers always checked (the run's own). */
export function installResponseCheck(origins: () => string[] = () => []): void {
  if (originalFetch) return;
  contractModel();
  knownOrigins = origins;
  const original = globalThis.fetch;
  originalFetch = original;
  globalThis.fetch = async function checkedFetch(
    input: Parameters<typeof fetch>[0],
    init?: Parameters<typeof fetch>[1],
  ): Promise<Response> {
    const response = await original(input, init);
    const request = requestOf(input, init);
    if (
      !request ||
      !LOCAL_HOSTS.has(request.url.hostname === '::1' ? '[::1]' : request.url.hostname) ||
      !SERVICE_PATH.test(request.url.pathname)
    )
      return response;
    const ours = originsNow().includes(request.url.origin) || response.headers.has('x-request-id');
    if (!ours) return response;
    const base = {
      method: request.method,
      url: request.url.pathname + request.url.search,
      status: response.status,
      headers: response.headers,
    };
    const json = /^application\/json\b/i.test(response.headers.get('content-type') ?? '');
    if (json && request.method !== 'HEAD' && response.body) {
      // A clone, read in the background: the caller gets the response at once and reads it as it likes.
      const job = response
        .clone()
        .text()
        .then((body) => void recordAnswer({ ...base, body }))
        .catch((error: unknown) => {
          // The caller aborted or the connection broke: not the contract's business.
          if ((error as Error).name !== 'AbortError') recordAnswer({ ...base, body: undefined });
        })
        .finally(() => pending.delete(job));
      pending.add(job);
    } else {
      recordAnswer({ ...base, body: response.body ? undefined : '' });
    }
    return response;
  };
}

/** Violations grouped by operation, status and problem, each with a count and its first example. */
export function summarizeViolations(): string[] {
  const groups = new Map<string, { v: Violation; n: number }>();
  for (const v of violations) {
    // Body problems differ by array index only: /items/3/actor and /items/0/actor are one kind.
    const key = `${v.route} ${v.status} ${v.error.replace(/\/\d+\//g, '/N/')}`;
    const entry = groups.get(key);
    if (entry) entry.n += 1;
    else groups.set(key, { v, n: 1 });
  }
  return [...groups.values()]
    .slice(0, 100)
    .map(
      ({ v, n }) =>
        `  ${v.route} → ${v.status}: ${v.error} (×${n})\n      e.g. ${v.method} ${v.url}${v.note ? `\n      sent: ${v.note}` : ''}`,
    );
}

/** Restores fetch, waits for the checks in flight, and throws listing every violation. */
export async function assertResponsesMatchContract(): Promise<void> {
  if (originalFetch) {
    globalThis.fetch = originalFetch;
    originalFetch = undefined;
  }
  await Promise.race([Promise.allSettled([...pending]), new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
  console.log(`\n  Contract check (the conformance package's judge): ${judged} answers judged, ${violations.length} violation(s)\n`);
  if (violations.length === 0) return;
  const kinds = summarizeViolations();
  throw new Error(
    `${violations.length} answer(s) do not match spec/generated/openapi.json, in ${kinds.length} kinds:\n${kinds.join('\n')}`,
  );
}
