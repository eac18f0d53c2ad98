/**
 * The fuzzer's run, shared by tests/contract/fuzz.test.ts (CI, 2,000+ cases) and scripts/fuzz.ts
 * (`npm run fuzz`, 10,000+): fast-check draws requests (requests.ts), each is sent (send.ts) and
 * must get:
 *   - an answer below 500, within 10 s;
 *   - an answer the contract allows, as the conformance package's judge sees it
 *     (tools/src/conformance/contract.ts, through response-check.ts, which also keeps it for the
 *     end-of-run report): a documented status, the documented headers and content type, a body
 *     matching the documented schema (the envelope, with `code` from ErrorCode), no body where none
 *     is documented, 404 or 405 with `Allow` where no operation has the path or the method;
 *   - an error message that names no internals (a stack frame, an SQL statement);
 *   - when refused (4xx): no change in the database (snapshot.ts).
 * A case that succeeded in changing something has the fixture (fixture.ts) repaired before the next.
 */
import fc from 'fast-check';
import { contractModel, recordAnswer } from '../response-check.js';
import { Fixture, type FuzzTarget } from './fixture.js';
import { requestArbitrary, type FuzzRequest } from './requests.js';
import { leakedInternals, send, type FuzzAnswer } from './send.js';
import { Snapshotter } from './snapshot.js';

export interface FuzzReport {
  seed: number;
  /** Cases fast-check ran (the generation phase). */
  runs: number;
  /** Requests sent, shrinking included. */
  requests: number;
  statuses: Record<string, number>;
  fiveXX: number;
  /** Answers the contract's judge found fault with. */
  nonConforming: number;
  /** Requests the server dropped or left unanswered for 10 s. */
  noAnswer: number;
  dbChanges: number;
  perOperation: Record<string, number>;
  slowest: { ms: number; request: string; status: number } | undefined;
  failure: string | undefined;
  ms: number;
}

export interface FuzzOptions {
  numRuns: number;
  seed?: number;
  /** Stop generating (and shrinking) after this long; what ran is reported. */
  timeLimitMs?: number;
  onSecret?: (value: string) => void;
  log?: (line: string) => void;
  /** Log every case and its answer. */
  verbose?: boolean;
}

function describe(request: FuzzRequest, resolve: (s: string) => string): string {
  const path = resolve(request.path);
  const body = request.body === undefined ? '' : ` body(${request.body.length} chars)=${JSON.stringify(request.body.slice(0, 160))}`;
  const headers = request.headers.map(([k, v]) => `${k}: ${v.length > 80 ? `${v.slice(0, 80)}…(${v.length})` : v}`).join(' | ');
  return (
    `${request.op}: ${request.method} ${path.length > 200 ? `${path.slice(0, 200)}…(${path.length})` : path} ` +
    `[${headers}]${body}${request.chunked ? ' chunked' : ''}`
  );
}

/** Header look-up over node:http's header object, as the contract's judge reads headers. */
function headersOf(answer: FuzzAnswer): { get(name: string): string | null } {
  return {
    get: (name) => {
      const value = answer.headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

export async function runFuzz(target: FuzzTarget, options: FuzzOptions): Promise<FuzzReport> {
  const log = options.log ?? (() => {});
  const fixture = new Fixture(target, options.onSecret);
  await fixture.setUp();
  const snapshots = new Snapshotter(target.db);
  let snapshot = await snapshots.take();
  const seed = options.seed ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  const report: FuzzReport = {
    seed,
    runs: 0,
    requests: 0,
    statuses: {},
    fiveXX: 0,
    nonConforming: 0,
    noAnswer: 0,
    dbChanges: 0,
    perOperation: {},
    slowest: undefined,
    failure: undefined,
    ms: 0,
  };
  const started = performance.now();
  const resolve = (s: string) => fixture.resolve(s);

  const property = fc.asyncProperty(requestArbitrary(contractModel()), async (request) => {
    report.requests += 1;
    if (report.requests % 500 === 0) log(`  … ${report.requests} requests, ${Math.round((performance.now() - started) / 1000)} s`);
    report.perOperation[request.op] = (report.perOperation[request.op] ?? 0) + 1;
    // Placeholders are resolved once, so the case that is judged is the case that was sent.
    const sent: FuzzRequest = {
      ...request,
      path: resolve(request.path),
      headers: request.headers.map(([k, v]) => [k, resolve(v)]),
      ...(request.body !== undefined ? { body: resolve(request.body) } : {}),
    };
    let answer: FuzzAnswer;
    try {
      answer = await send(target.url, sent, (s) => s);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      // Node's client refusing what the generator made is a bug of the generator, not of the service.
      if (/^ERR_(UNESCAPED_CHARACTERS|INVALID_CHAR|INVALID_HTTP_TOKEN|HTTP_INVALID_HEADER_VALUE|INVALID_ARG)/.test(code))
        throw new Error(`the fuzzer generated a request Node cannot send (${code}): ${(error as Error).message}`, { cause: error });
      report.noAnswer += 1;
      throw new Error(`no answer: ${(error as Error).message} (${code})`, { cause: error });
    }
    report.statuses[answer.status] = (report.statuses[answer.status] ?? 0) + 1;
    if (options.verbose)
      log(
        `${answer.status} ${Math.round(answer.ms)} ms ${describe(request, (s) => s)} → ` +
          (answer.body ? answer.body.slice(0, 160) : `${JSON.stringify(sent).slice(0, 300)} ${JSON.stringify(answer.headers)}`),
      );
    if (!report.slowest || answer.ms > report.slowest.ms)
      report.slowest = { ms: answer.ms, request: describe(request, (s) => s), status: answer.status };
    const problems = answer.status >= 500 ? [`status ${answer.status} (5xx)`] : [];
    if (answer.status >= 500) report.fiveXX += 1;
    const violations = recordAnswer({
      method: sent.method,
      url: sent.path,
      status: answer.status,
      headers: headersOf(answer),
      body: answer.body,
      note: describe(request, (s) => s),
    });
    if (violations.length) report.nonConforming += 1;
    problems.push(...violations, ...leakedInternals(answer));

    if (answer.status >= 400) {
      const after = await snapshots.take();
      const changed = Snapshotter.diff(snapshot, after);
      snapshot = after;
      if (changed.length) {
        report.dbChanges += 1;
        problems.push(`refused with ${answer.status} but changed the database: ${changed.join(', ')}`);
      }
    } else {
      if (sent.method !== 'GET' && sent.method !== 'HEAD') await fixture.repair();
      snapshot = await snapshots.take();
    }
    if (problems.length) {
      throw new Error(
        `${problems.join('; ')}\n    answer ${answer.status} in ${Math.round(answer.ms)} ms: ${(answer.body ?? '').slice(0, 300)}`,
      );
    }
  });

  const details = await fc.check(property, {
    numRuns: options.numRuns,
    seed,
    ...(options.timeLimitMs ? { interruptAfterTimeLimit: options.timeLimitMs, markInterruptAsFailure: false } : {}),
  });
  report.runs = details.numRuns;
  report.ms = performance.now() - started;
  if (details.failed) {
    report.failure = fc.defaultReportMessage(details) ?? 'failed';
    if (details.counterexample)
      report.failure += `\nShrunk counterexample, with placeholders resolved:\n  ${describe(details.counterexample[0], resolve)}`;
  }
  return report;
}

export function formatReport(report: FuzzReport): string {
  const statuses = Object.entries(report.statuses)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
  return [
    `fuzz: ${report.runs} cases (${report.requests} requests with shrinking) in ${(report.ms / 1000).toFixed(1)} s, seed ${report.seed}`,
    `  statuses: ${statuses}`,
    `  5xx: ${report.fiveXX}; answers not as the contract says: ${report.nonConforming}; dropped or unanswered: ${report.noAnswer}; ` +
      `refused requests that changed the database: ${report.dbChanges}`,
    `  operations covered: ${Object.keys(report.perOperation).length}`,
    `  slowest: ${report.slowest ? `${report.slowest.ms.toFixed(0)} ms, ${report.slowest.status}, ${report.slowest.request}` : 'none'}`,
    `  failure: ${report.failure ?? 'none'}`,
  ].join('\n');
}
