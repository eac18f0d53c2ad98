/**
 * How a resource method (generated/operations.ts) becomes a request and its answer a value: the
 * URL from the path template and the arguments, the headers (the client's, an Idempotency-Key for
 * the writes that take one, the call's own), and the answer's `data` with its head (a
 * SignalboardPromise), or a SignalboardError.
 */
import type { Page } from './contract.js';
import { SignalboardApiError, SignalboardError, type Answer } from './errors.js';
import { send } from './http.js';
import { clientHeaders, policyOf, type RequestOptions, type Settings } from './options.js';
import { Paginated } from './pagination.js';
import { responseInfo, SignalboardPromise, type WithResponse } from './response.js';

export type { RequestOptions };

/** What the generated methods say of their operation. */
export interface Operation {
  method: string;
  /** The contract's path template, e.g. `/v1/projects/{namespace}`. */
  path: string;
  /** Sends an Idempotency-Key: most POSTs and PATCHes (scripts/sdk-methods.ts says which). */
  idempotencyKey?: true;
  /** False for the one operation whose answer is the body itself, not an envelope around it. */
  envelope?: false;
}

export interface CallInput {
  path?: Record<string, string>;
  query?: object | undefined;
  body?: unknown;
}

/** What the generated methods call. `T` and `P` are the contract's types of the answer, from the method's signature. */
export interface Caller {
  call<T>(operation: Operation, input: CallInput, options: RequestOptions | undefined): SignalboardPromise<T>;
  paginate<P extends Page>(operation: Operation, input: CallInput, options: RequestOptions | undefined): Paginated<P>;
}

export class Requester implements Caller {
  constructor(private readonly settings: Settings) {}

  call<T>(operation: Operation, input: CallInput, options: RequestOptions | undefined): SignalboardPromise<T> {
    return new SignalboardPromise(this.answered<T>(operation, input, options));
  }

  private async answered<T>(operation: Operation, input: CallInput, options: RequestOptions | undefined): Promise<WithResponse<T>> {
    const headers = clientHeaders(this.settings);
    headers.set('Accept', 'application/json');
    if (input.body !== undefined) headers.set('Content-Type', 'application/json');
    const key = options?.idempotencyKey === undefined ? (operation.idempotencyKey ? newKey() : null) : options.idempotencyKey;
    if (key !== null) headers.set('Idempotency-Key', key);
    for (const [name, value] of Object.entries(options?.headers ?? {})) headers.set(name, value);
    const url = this.settings.baseUrl + filled(operation.path, input.path) + queryString(input.query);
    const body = input.body === undefined ? undefined : JSON.stringify(input.body);
    const answer = await send({ method: operation.method, url, headers, body }, policyOf(this.settings, options));
    return { data: decoded<T>(answer, operation), response: responseInfo(answer) };
  }

  paginate<P extends Page>(operation: Operation, input: CallInput, options: RequestOptions | undefined): Paginated<P> {
    const query = (input.query ?? {}) as { cursor?: string };
    return new Paginated<P>(
      (cursor) => this.call<P>(operation, { ...input, query: { ...query, cursor } }, options),
      query.cursor,
      options?.signal,
    );
  }
}

function decoded<T>(answer: Answer, operation: Operation): T {
  if (answer.status < 200 || answer.status > 299) throw SignalboardApiError.from(answer);
  if (answer.status === 204) return undefined as T;
  let body: unknown;
  try {
    body = JSON.parse(answer.body);
  } catch {
    throw SignalboardApiError.unexpected(answer, `The service answered ${answer.status} with a body that is not JSON.`);
  }
  if (operation.envelope === false) return body as T;
  const envelope = body as { success?: unknown; data?: unknown } | null;
  if (envelope?.success !== true || !('data' in envelope))
    throw SignalboardApiError.unexpected(answer, `The service answered ${answer.status} without a success envelope.`);
  return envelope.data as T;
}

/**
 * The path with its parameters, each percent-encoded. A parameter that is empty, `.` or `..` is
 * refused: URL parsing would drop or resolve it (even encoded), and the request would reach
 * another route, e.g. deleting `/v1/projects/acme/insights/..` is deleting the project.
 */
function filled(template: string, params: Record<string, string> = {}): string {
  return template.replace(/\{([^}]+)\}/g, (_match, name: string) => {
    const value = params[name];
    if (typeof value !== 'string' || value === '' || value === '.' || value === '..')
      throw new SignalboardError(`${name} must be a string other than '', '.' and '..', not ${JSON.stringify(value)}.`, {
        code: 'invalid_argument',
      });
    return encodeURIComponent(value);
  });
}

type QueryValue = string | number | boolean | null | undefined;

function queryString(query: object | undefined): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {}) as [string, QueryValue | QueryValue[]][])
    for (const item of [value].flat()) if (item !== undefined && item !== null) params.append(name, String(item));
  const text = params.toString();
  return text ? `?${text}` : '';
}

/**
 * A random UUID v4. `crypto.randomUUID` exists in Node.js and in a browser's secure contexts (https,
 * localhost); a page served over plain http has only `getRandomValues`.
 */
function newKey(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
