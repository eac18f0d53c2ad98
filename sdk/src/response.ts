/**
 * What a call's answer says besides its data, and the promise every call answers: awaited, it is
 * the data, as always; its `withResponse()` is the data with the answer's status, headers, request
 * id and rate-limit state (openai-node's pattern):
 *
 *   const { data: project, response } = await sb.projects.get('acme').withResponse();
 *   console.log(response.status, response.requestId, response.rateLimit?.remaining);
 *
 * It is per call, not a client's "last response", so calls running at once never see each other's.
 */
import type { Answer } from './errors.js';

/** The rate limit the answer reports (`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`). */
export interface RateLimit {
  /** Requests allowed in the current window. */
  limit: number;
  /** Requests left in it. */
  remaining: number;
  /** Seconds until the window starts again. */
  reset: number;
}

/** An answer's head, as `withResponse()` and the stream's `onOpen` give it. */
export interface ResponseInfo {
  /** The HTTP status: 200, 201 or 202, or 204 (whose data is undefined). */
  status: number;
  headers: Headers;
  /** `X-Request-Id`: the id the service logged the request under (quote it when reporting a problem). */
  requestId: string | undefined;
  /**
   * The rate limit the request counted against; undefined when the answer carries none (the
   * operator turned the limit off, or the route is not counted: `/healthz`, `/readyz`).
   */
  rateLimit: RateLimit | undefined;
}

export interface WithResponse<T> {
  data: T;
  response: ResponseInfo;
}

/** The head of `answer` (the last attempt's, when the call was repeated). */
export function responseInfo(answer: Pick<Answer, 'status' | 'headers'>): ResponseInfo {
  const { status, headers } = answer;
  return { status, headers, requestId: headers.get('X-Request-Id') ?? undefined, rateLimit: rateLimitOf(headers) };
}

/** All three headers as whole numbers, or undefined: a partial or malformed set says nothing reliable. */
function rateLimitOf(headers: Headers): RateLimit | undefined {
  const [limit, remaining, reset] = ['Limit', 'Remaining', 'Reset'].map((name) => {
    const value = headers.get(`RateLimit-${name}`)?.trim();
    return value && /^\d+$/.test(value) ? Number(value) : undefined;
  });
  return limit === undefined || remaining === undefined || reset === undefined ? undefined : { limit, remaining, reset };
}

/**
 * A rejection's reason as Promise's own signatures type it (`any`), so that
 * `.catch((error: SignalboardError) => …)` compiles here as on any promise.
 */
type Reason = Parameters<NonNullable<Parameters<Promise<unknown>['catch']>[0]>>[0];

/**
 * What every call answers: a promise of its data, with `withResponse()` for the data and the
 * answer's head. The work is one request (`answer`); `then`, `catch` and `finally` read the data
 * from it, so a failure rejects whichever of the two the caller awaits, and only that one: a call
 * awaited through `withResponse()` leaves no rejection unhandled elsewhere.
 */
export class SignalboardPromise<T> extends Promise<T> {
  readonly #answer: Promise<WithResponse<T>>;
  #data: Promise<T> | undefined;

  constructor(answer: Promise<WithResponse<T>>) {
    // The promise's own state is never read: then, catch and finally go to `answer`.
    super((resolve) => resolve(undefined as T));
    this.#answer = answer;
  }

  /** Promise methods that make a new promise (`Promise.prototype.then` called directly) make a plain one. */
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  /** The data and the answer's head: `{ data, response: { status, headers, requestId, rateLimit } }`. */
  withResponse(): Promise<WithResponse<T>> {
    return this.#answer;
  }

  override then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onRejected?: ((reason: Reason) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.#dataPromise().then(onFulfilled, onRejected);
  }

  override catch<R = never>(onRejected?: ((reason: Reason) => R | PromiseLike<R>) | null): Promise<T | R> {
    return this.#dataPromise().catch(onRejected);
  }

  override finally(onFinally?: (() => void) | null): Promise<T> {
    return this.#dataPromise().finally(onFinally);
  }

  #dataPromise(): Promise<T> {
    return (this.#data ??= this.#answer.then(({ data }) => data));
  }
}
