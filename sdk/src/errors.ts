/** A failed call, as the SDK's helpers (`publish`, `streamEvents`) report it. */
import type { components } from '../../spec/generated/openapi.js';

type ErrorCode = components['schemas']['ErrorCode'];
type ErrorDetail = components['schemas']['ErrorDetail'];

export class SignalboardError extends Error {
  override readonly name = 'SignalboardError';

  constructor(
    /** The HTTP status of the answer. */
    readonly status: number,
    /** The failure envelope's `code`; `unexpected_response` when the answer carried no envelope. */
    readonly code: ErrorCode | 'unexpected_response',
    message: string,
    /** Validation problems (`invalid_request` only). */
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }

  /** Reads the failure envelope from an answer that was not a success. */
  static async from(response: Response): Promise<SignalboardError> {
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      body = undefined;
    }
    return SignalboardError.fromEnvelope(response.status, body);
  }

  static fromEnvelope(status: number, body: unknown): SignalboardError {
    const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
    if (error && typeof error.code === 'string' && typeof error.message === 'string') {
      return new SignalboardError(
        status,
        error.code as ErrorCode,
        error.message,
        Array.isArray(error.details) ? (error.details as ErrorDetail[]) : undefined,
      );
    }
    return new SignalboardError(status, 'unexpected_response', `The service answered ${status} without an error envelope.`);
  }
}
