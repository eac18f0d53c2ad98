/**
 * Sending a request: its attempts, each within the timeout, and the waits between them.
 *
 * An attempt that failed in a way the next one may not is repeated, up to `maxRetries` times:
 * 429 (rate limited), 503 (unavailable), 409 `idempotency_in_progress` (an attempt with the same
 * Idempotency-Key is still being applied), a timeout, a network error. Only when repeating it is
 * safe, though:
 *
 * - GET, HEAD, OPTIONS, PUT and DELETE, idempotent by HTTP semantics (RFC 9110 §9.2.2): a second
 *   DELETE whose first went through (its answer lost on the way) answers 404;
 * - a request that carries an Idempotency-Key: the service applies a key once and answers every
 *   repeat as it answered the first;
 * - a request that was never sent: its connection failed to open (refused, reset while
 *   connecting, no such host).
 *
 * A POST or PATCH without a key is sent once, but for that last case. Between attempts it waits
 * what the answer's Retry-After asks (over MAX_RETRY_AFTER_S it does not wait: the error is thrown,
 * with `retryAfter`), or else a random time up to 0.5 s × 2^attempt, at most 8 s (exponential
 * backoff with full jitter, so that clients that failed together do not retry together).
 */
import {
  envelopeError,
  retryAfterSeconds,
  SignalboardAbortError,
  SignalboardConnectionError,
  SignalboardTimeoutError,
  type Answer,
} from './errors.js';

export interface Outgoing {
  method: string;
  url: string;
  headers: Headers;
  body?: string | undefined;
}

export interface Policy {
  /** Milliseconds for each attempt, from sending to the last byte of the answer; Infinity for no limit. */
  timeout: number;
  maxRetries: number;
  signal?: AbortSignal | undefined;
  /** The fetch to use; global `fetch` when undefined. */
  fetch?: typeof fetch | undefined;
}

const REPEATABLE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
/** The longest Retry-After worth waiting for inside a call; the contract bounds it to 60 s. */
export const MAX_RETRY_AFTER_S = 60;
const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 8_000;

/** Sends `outgoing` and answers the last attempt's answer, whatever its status; throws when no answer came. */
export async function send(outgoing: Outgoing, policy: Policy): Promise<Answer> {
  const repeatable = REPEATABLE_METHODS.has(outgoing.method.toUpperCase()) || outgoing.headers.has('Idempotency-Key');
  for (let attempt = 0; ; attempt++) {
    const last = attempt >= policy.maxRetries;
    let answer: Answer;
    try {
      answer = await attemptOnce(outgoing, policy);
    } catch (error) {
      if (last || !(error instanceof SignalboardConnectionError) || !(repeatable || neverSent(error.cause))) throw error;
      await pause(backoff(attempt), policy.signal);
      continue;
    }
    const wait = last || !repeatable ? undefined : retryDelay(answer, attempt);
    if (wait === undefined) return answer;
    await pause(wait, policy.signal);
  }
}

async function attemptOnce(outgoing: Outgoing, policy: Policy): Promise<Answer> {
  const { signal } = policy;
  throwIfAborted(signal);
  const controller = new AbortController();
  const abort = () => controller.abort(signal?.reason);
  signal?.addEventListener('abort', abort, { once: true });
  const timer = Number.isFinite(policy.timeout) ? setTimeout(() => controller.abort(), policy.timeout) : undefined;
  // Called unbound: a browser's fetch throws when called as a method of another object.
  const doFetch = policy.fetch ?? fetch;
  try {
    const response = await doFetch(outgoing.url, {
      method: outgoing.method,
      headers: outgoing.headers,
      body: outgoing.body ?? null,
      signal: controller.signal,
    });
    // Read within the timeout: an answer that stalls halfway is a timeout too.
    return { status: response.status, headers: response.headers, body: await response.text() };
  } catch (cause) {
    if (signal?.aborted) throw aborted(signal);
    if (controller.signal.aborted)
      throw new SignalboardTimeoutError(`No whole answer from ${new URL(outgoing.url).origin} within ${policy.timeout} ms.`, {
        code: 'timeout',
      });
    throw connectionError(outgoing.url, cause);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', abort);
  }
}

/** What fetch threw (or a body's read) as the SDK's `network_error`, naming the origin and what failed. */
export function connectionError(url: string, cause: unknown): SignalboardConnectionError {
  // Node.js's fetch says only "fetch failed"; what failed is its cause.
  const reason = (cause as { cause?: Error } | undefined)?.cause?.message ?? (cause as Error | undefined)?.message;
  return new SignalboardConnectionError(`Could not reach ${new URL(url).origin}: ${reason}.`, { code: 'network_error', cause });
}

/**
 * Whether fetch failed before the request left: the connection never opened (Node.js reports the
 * system call, `connect`, or a failed name lookup). A browser does not say, so there it is false.
 */
function neverSent(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown; syscall?: unknown } } | undefined)?.cause;
  return cause?.syscall === 'connect' || cause?.syscall === 'getaddrinfo' || cause?.code === 'UND_ERR_CONNECT_TIMEOUT';
}

/** How long to wait before repeating a request that got `answer`; undefined when it is not to be repeated. */
function retryDelay(answer: Answer, attempt: number): number | undefined {
  const code: string | undefined = answer.status === 409 ? envelopeError(answer.body)?.code : undefined;
  if (answer.status !== 429 && answer.status !== 503 && code !== 'idempotency_in_progress') return undefined;
  const after = retryAfterSeconds(answer.headers);
  if (after === undefined) return backoff(attempt);
  return after <= MAX_RETRY_AFTER_S ? after * 1000 : undefined;
}

function backoff(attempt: number): number {
  return Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
}

function aborted(signal: AbortSignal): SignalboardAbortError {
  return new SignalboardAbortError('The call was aborted.', { code: 'aborted', cause: signal.reason });
}

/**
 * Throws a SignalboardAbortError when `signal` has aborted: how every call, list and stream ends
 * on an abort, whatever it was doing (sending, waiting to retry, between pages or events).
 */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw aborted(signal);
}

/** Waits `ms`; rejects with a SignalboardAbortError as soon as `signal` aborts. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
