/**
 * One HTTP attempt at a webhook endpoint, bounded every way a receiver could hold it: the address
 * passes the guard (address-guard.ts) and the connection goes to the address checked; no redirect
 * is followed (a 3xx is an answer like any other non-2xx); the whole attempt, connecting included,
 * ends at `timeoutMs`; at most 64 KiB of the answer is read, and its first 1 KiB kept.
 */
import http from 'node:http';
import https from 'node:https';
import { checkUrl, guardedLookup, RefusedAddress, type AddressRules } from './address-guard.js';

/** What is read of an answer at most; past it the connection is closed. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** What of an answer is kept and shown. */
const KEPT_ANSWER_BYTES = 1024;

export interface AttemptResult {
  /** The answer's status; null when none came. */
  statusCode: number | null;
  /** The first 1 KiB of the answer, as text; null when none came. */
  body: string | null;
  durationMs: number;
  /** Why no answer came; null when one came. */
  error: string | null;
}

/** Whether the attempt delivered: a 2xx answer (within the timeout, or there would be none). */
export function delivered(result: AttemptResult): boolean {
  return result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;
}

/** The attempt as a delivery's log keeps it, begun at `at` (ISO 8601). */
export function logEntry(at: string, result: AttemptResult) {
  return { at, status_code: result.statusCode, duration_ms: result.durationMs, body: result.body, error: result.error };
}

export interface Sending {
  rules: AddressRules;
  timeoutMs: number;
  /** Keep-alive connections to reuse, by protocol; their sockets were made through the guard too. */
  agents?: { http: http.Agent; https: https.Agent } | undefined;
}

/**
 * What the attempt's error says: a refusal's own words (one for every refused address, whichever
 * way it was refused: address-guard.ts), or the connection error's code.
 */
function describe(error: unknown): string {
  if (error instanceof RefusedAddress) return `refused: the URL ${error.message}`;
  const code = (error as NodeJS.ErrnoException).code;
  return code ? `connection failed (${code})` : 'connection failed';
}

/** POSTs `body` to `target` with `headers`; never throws. */
export function send(target: string, body: string, headers: Record<string, string>, sending: Sending): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let url: URL;
  try {
    url = checkUrl(target, sending.rules);
  } catch (error) {
    return Promise.resolve({ statusCode: null, body: null, durationMs: 0, error: describe(error) });
  }
  const secure = url.protocol === 'https:';
  return new Promise((resolve) => {
    let done = false;
    const finish = (result: Omit<AttemptResult, 'durationMs'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: elapsed() });
    };
    const request = (secure ? https : http).request(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      lookup: guardedLookup(sending.rules),
      agent: sending.agents ? (secure ? sending.agents.https : sending.agents.http) : false,
    });
    const timer = setTimeout(() => {
      request.destroy();
      finish({ statusCode: null, body: null, error: `no answer within ${sending.timeoutMs} ms` });
    }, sending.timeoutMs);
    request.on('error', (error) => finish({ statusCode: null, body: null, error: describe(error) }));
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      let read = 0;
      const answered = () =>
        finish({
          statusCode: response.statusCode ?? null,
          body: Buffer.concat(chunks).subarray(0, KEPT_ANSWER_BYTES).toString('utf8'),
          error: null,
        });
      response.on('data', (chunk: Buffer) => {
        if (read < KEPT_ANSWER_BYTES) chunks.push(chunk);
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) {
          answered();
          response.destroy();
        }
      });
      response.on('end', answered);
      // An answer cut short still has its status: the receiver answered.
      response.on('error', answered);
      response.on('aborted', answered);
    });
    request.end(body);
  });
}
