/** A client's options, a call's options, and the headers every request of a client carries. */
import { SignalboardError } from './errors.js';
import { VERSION } from './generated/version.js';
import type { Policy } from './http.js';

export interface SignalboardOptions {
  /** Where the service runs, e.g. `https://signalboard.example.com` (no `/v1`: the paths carry it). */
  baseUrl: string;
  /** A session (`ses_…`) or API (`api_…`) token, sent as `Authorization: Bearer <token>`. */
  token?: string | undefined;
  /** Milliseconds each attempt may take, from sending to the answer's last byte. Default 60 000; `Infinity` for no limit. */
  timeout?: number | undefined;
  /** How many times a failed call is repeated when repeating it is safe (see the README's "Retries"). Default 2. */
  maxRetries?: number | undefined;
  /** Headers sent with every request. */
  headers?: Record<string, string> | undefined;
  /** The fetch to use; global `fetch` by default. */
  fetch?: typeof fetch | undefined;
}

/** A call's own options, over the client's. */
export interface RequestOptions {
  timeout?: number | undefined;
  maxRetries?: number | undefined;
  /**
   * Aborting it ends the call at once with a SignalboardAbortError (`code` `aborted`, `cause` the
   * signal's reason), whatever it is doing: sending, reading the answer, waiting to retry; a list
   * at its next page or item. An already aborted signal sends nothing. The stream does the same.
   */
  signal?: AbortSignal | undefined;
  headers?: Record<string, string> | undefined;
  /**
   * The Idempotency-Key of this call. By default a POST or PATCH that takes one gets a random UUID,
   * the same on every attempt. Pass your own to make a write safe to repeat across calls too (after
   * a restart, from a queue); `null` sends none, and the write is then repeated only if it was
   * never sent.
   */
  idempotencyKey?: string | null | undefined;
}

/** A client's options, checked and with their defaults. */
export interface Settings {
  baseUrl: string;
  timeout: number;
  maxRetries: number;
  headers: Record<string, string>;
  fetch: typeof fetch | undefined;
  token: string | undefined;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_RETRIES = 2;

export function settingsOf(options: SignalboardOptions): Settings {
  if (!/^https?:\/\/[^/]/i.test(options.baseUrl ?? ''))
    throw invalid(`baseUrl must be an http(s) URL such as https://signalboard.example.com, not ${JSON.stringify(options.baseUrl)}.`);
  const settings = {
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    timeout: options.timeout ?? DEFAULT_TIMEOUT_MS,
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
    headers: options.headers ?? {},
    fetch: options.fetch,
    token: options.token,
  };
  checkLimits(settings);
  return settings;
}

/** The policy of one call: the client's, with the call's own timeout, retries and signal. */
export function policyOf(settings: Settings, options: RequestOptions | undefined): Policy {
  const policy = {
    timeout: options?.timeout ?? settings.timeout,
    maxRetries: options?.maxRetries ?? settings.maxRetries,
    signal: options?.signal,
    fetch: settings.fetch,
  };
  checkLimits(policy);
  return policy;
}

function checkLimits({ timeout, maxRetries }: { timeout: number; maxRetries: number }): void {
  if (!(timeout > 0)) throw invalid(`timeout must be a positive number of milliseconds (or Infinity), not ${timeout}.`);
  if (!Number.isInteger(maxRetries) || maxRetries < 0) throw invalid(`maxRetries must be a whole number ≥ 0, not ${maxRetries}.`);
}

function invalid(message: string): SignalboardError {
  return new SignalboardError(message, { code: 'invalid_argument' });
}

/**
 * The headers of every request of a client, before the call's own: the credential, the
 * User-Agent, the client's headers. Only on Node.js is there a User-Agent to set: browsers do not
 * let a page set one.
 */
export function clientHeaders(settings: Settings): Headers {
  const headers = new Headers();
  if (settings.token !== undefined) headers.set('Authorization', `Bearer ${settings.token}`);
  const node = (globalThis as { process?: { version?: string; versions?: { node?: string } } }).process;
  if (node?.versions?.node) headers.set('User-Agent', `signalboard-sdk/${VERSION} node/${node.version}`);
  for (const [name, value] of Object.entries(settings.headers)) headers.set(name, value);
  return headers;
}
