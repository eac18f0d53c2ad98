/**
 * The SDK's one error type: every failed call throws a SignalboardError, whatever failed. Its
 * subclass and `code` say what:
 *
 * - SignalboardApiError: the service answered with an error: `status`, and the envelope's `code`
 *   (an ErrorCode), `message` and `details`; or with something that is not the contract's, such as
 *   a proxy's HTML page (`unexpected_response`).
 * - SignalboardConnectionError (`network_error`): no answer came (refused, reset, no such host…);
 *   `cause` is what fetch threw. SignalboardTimeoutError (`timeout`) is one: no whole answer
 *   within the call's `timeout`.
 * - SignalboardAbortError (`aborted`): the caller's AbortSignal fired; `cause` is its reason.
 * - SignalboardError itself (`invalid_argument`): an argument the SDK refuses before sending.
 *
 * `status` is 0 whenever no answer came. `requestId` is the answer's X-Request-Id, the id the
 * service logged it under (quote it when reporting a problem); `retryAfter` the seconds the
 * answer's Retry-After asked for.
 */
import type { components } from '../../spec/generated/openapi.js';

export type ErrorCode = components['schemas']['ErrorCode'];
type ErrorDetail = components['schemas']['ErrorDetail'];

/** The codes of failures the SDK names itself, beside the service's ErrorCodes. */
export type ClientErrorCode = 'network_error' | 'timeout' | 'aborted' | 'unexpected_response' | 'invalid_argument';

/** An answer, read whole. */
export interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

interface Fields {
  status?: number;
  code: ErrorCode | ClientErrorCode;
  details?: ErrorDetail[] | undefined;
  requestId?: string | undefined;
  retryAfter?: number | undefined;
  cause?: unknown;
}

export class SignalboardError extends Error {
  override readonly name: string = 'SignalboardError';
  /** The answer's HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The envelope's ErrorCode, or one of the SDK's own (ClientErrorCode). */
  readonly code: ErrorCode | ClientErrorCode;
  /** What was wrong with the request, field by field (`invalid_request`). */
  readonly details: ErrorDetail[] | undefined;
  /** The answer's X-Request-Id: the id the service logged the request under. */
  readonly requestId: string | undefined;
  /** The seconds the answer's Retry-After asked to wait before trying again. */
  readonly retryAfter: number | undefined;

  constructor(message: string, fields: Fields) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.status = fields.status ?? 0;
    this.code = fields.code;
    this.details = fields.details;
    this.requestId = fields.requestId;
    this.retryAfter = fields.retryAfter;
  }
}

/** The service answered with an error, or with something that is not the contract's. */
export class SignalboardApiError extends SignalboardError {
  override readonly name: string = 'SignalboardApiError';

  /** The error an answer carries: its envelope's, or `unexpected_response` when it has none. */
  static from(answer: Answer): SignalboardApiError {
    const error = envelopeError(answer.body);
    if (!error) return SignalboardApiError.unexpected(answer, `The service answered ${answer.status} without an error envelope.`);
    return new SignalboardApiError(error.message, { ...answerFields(answer), code: error.code, details: error.details });
  }

  /** An answer that is not what the contract says it would be. */
  static unexpected(answer: Answer, message: string): SignalboardApiError {
    return new SignalboardApiError(message, { ...answerFields(answer), code: 'unexpected_response' });
  }
}

function answerFields(answer: Answer): Pick<Fields, 'status' | 'requestId' | 'retryAfter'> {
  return {
    status: answer.status,
    requestId: answer.headers.get('X-Request-Id') ?? undefined,
    retryAfter: retryAfterSeconds(answer.headers),
  };
}

/** No answer came: the connection could not be made, or broke. */
export class SignalboardConnectionError extends SignalboardError {
  override readonly name: string = 'SignalboardConnectionError';
}

/** No whole answer came within the call's timeout. */
export class SignalboardTimeoutError extends SignalboardConnectionError {
  override readonly name: string = 'SignalboardTimeoutError';
}

/** The caller's AbortSignal fired. */
export class SignalboardAbortError extends SignalboardError {
  override readonly name: string = 'SignalboardAbortError';
}

/** The failure envelope's `error`, when `body` is one. */
export function envelopeError(body: string): { code: ErrorCode; message: string; details?: ErrorDetail[] } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const error = (parsed as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  if (typeof error?.code !== 'string' || typeof error.message !== 'string') return undefined;
  return {
    code: error.code as ErrorCode,
    message: error.message,
    ...(Array.isArray(error.details) ? { details: error.details as ErrorDetail[] } : {}),
  };
}

/** Retry-After in seconds: delay-seconds, or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get('Retry-After')?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
