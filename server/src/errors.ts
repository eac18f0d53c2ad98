/**
 * Named errors, each with the status and code the contract gives it. Domain and handlers throw
 * these; the envelope middleware (http/envelope.ts) is the only place that turns them into answers.
 */
import type { components } from '../../spec/generated/openapi.js';

export type ErrorCode = components['schemas']['ErrorCode'];
export type ErrorDetail = components['schemas']['ErrorDetail'];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidRequest extends ApiError {
  constructor(message: string, details?: ErrorDetail[]) {
    super(400, 'invalid_request', message, details);
  }

  /** One bad field, pointed at as the contract's validator would; the message names it (`tag 1` for an item of a list). */
  static field(path: string, message: string): InvalidRequest {
    const [name, index] = path.split('/').slice(-2);
    return new InvalidRequest(`${/^\d+$/.test(index!) ? `${name} ${index}` : index} ${message}`, [{ path, message }]);
  }
}

export class InvalidInvite extends ApiError {
  constructor() {
    super(400, 'invalid_invite', 'The invite code is unknown, used up or expired.');
  }
}

export class Unauthenticated extends ApiError {
  /** `headers`: more to send with the 401 (a `Set-Cookie` that clears a session cookie naming no session). */
  constructor(
    code: 'unauthenticated' | 'invalid_credentials' = 'unauthenticated',
    message = 'A valid credential is required.',
    headers: Record<string, string> = {},
  ) {
    super(401, code, message, undefined, { 'WWW-Authenticate': 'Bearer', ...headers });
  }
}

/** The session cookie came without `Authorization` from a page of another origin (http/session-cookie.ts). */
export class CsrfRefused extends ApiError {
  constructor() {
    super(403, 'csrf_refused', 'The session cookie is accepted only from pages of this service; nothing was done.');
  }
}

export class Forbidden extends ApiError {
  constructor(code: 'already_authenticated' | 'session_required' | 'not_owner' | 'forbidden', message: string) {
    super(403, code, message);
  }
}

/** The API token's scopes do not cover the operation (its `x-scope`): decided in policies/project.ts before any handler runs. */
export class InsufficientScope extends ApiError {
  constructor(message: string) {
    super(403, 'insufficient_scope', message);
  }
}

export class NotFound extends ApiError {
  constructor(message = 'Not found.') {
    super(404, 'not_found', message);
  }
}

/** The one 404 for a project that does not exist and for one the caller is not a member of: they must read alike. */
export function projectNotFound(): NotFound {
  return new NotFound('No project with this namespace.');
}

export class MethodNotAllowed extends ApiError {
  constructor(allowed: string[]) {
    super(405, 'method_not_allowed', `This path answers only ${allowed.join(', ')}.`, undefined, { Allow: allowed.join(', ') });
  }
}

export class Conflict extends ApiError {
  constructor(
    code:
      | 'namespace_taken'
      | 'username_taken'
      | 'email_taken'
      | 'already_member'
      | 'already_invited'
      | 'owner_cannot_leave'
      | 'feed_name_taken'
      | 'last_feed'
      | 'event_expired',
    message: string,
  ) {
    super(409, code, message);
  }
}

/** The first request with this `Idempotency-Key` is still being handled (http/idempotency.ts): its answer is replayed once recorded. */
export class IdempotencyInProgress extends ApiError {
  constructor() {
    const message = 'A request with this Idempotency-Key is still being handled; retry once it has answered.';
    super(409, 'idempotency_in_progress', message, undefined, { 'Retry-After': '1' });
  }
}

/** A collection a user can grow is at its cap (config.ts `limits`); `limit` names the setting. */
export class LimitReached extends ApiError {
  constructor(what: string, limit: { setting: string; value: number }) {
    super(409, 'limit_reached', `${what}: the limit is ${limit.value} (${limit.setting}).`, [
      { path: `/limits/${limit.setting}`, message: `at most ${limit.value}` },
    ]);
  }
}

export class PayloadTooLarge extends ApiError {
  /** What becomes of the rest of the body, and so of the connection, http/body.ts decides for every unread body. */
  constructor(limitBytes: number) {
    const limit = limitBytes % 1_048_576 === 0 ? `${limitBytes / 1_048_576} MiB` : `${limitBytes / 1024} KiB`;
    super(413, 'payload_too_large', `The body is larger than ${limit}.`);
  }
}

export class UnsupportedMediaType extends ApiError {
  constructor() {
    super(415, 'unsupported_media_type', 'Send the body as application/json.');
  }
}

/** The `Idempotency-Key` was used within its lifetime for a request with another method, path or body. */
export class IdempotencyKeyReused extends ApiError {
  constructor() {
    super(
      422,
      'idempotency_key_reused',
      'This Idempotency-Key was already used for a request with another method, path or body; use a new key for a new request.',
    );
  }
}

export class TooManyRequests extends ApiError {
  constructor(retryAfterSeconds: number) {
    super(429, 'rate_limited', `Too many requests; retry in ${retryAfterSeconds} s.`, undefined, {
      'Retry-After': String(retryAfterSeconds),
    });
  }
}

/** The caller has as many live streams open as a user may. */
export class TooManyStreams extends ApiError {
  constructor(limit: number, retryAfterSeconds: number) {
    super(429, 'too_many_streams', `You already have ${limit} live streams open; close one first.`, undefined, {
      'Retry-After': String(retryAfterSeconds),
    });
  }
}

export class BillingUnavailable extends ApiError {
  constructor() {
    super(502, 'billing_unavailable', 'The payment provider could not be reached or failed; nothing was changed.');
  }
}

export class Unavailable extends ApiError {
  constructor(message = 'The service is temporarily unavailable; retry later.', retryAfterSeconds?: number) {
    super(503, 'unavailable', message, undefined, retryAfterSeconds === undefined ? {} : { 'Retry-After': String(retryAfterSeconds) });
  }
}

export class Internal extends ApiError {
  constructor() {
    super(500, 'internal', 'Something went wrong on our side.');
  }
}

/** The project already has a Stripe subscription: a second checkout would bill twice. */
export class AlreadySubscribed extends ApiError {
  constructor() {
    super(409, 'already_subscribed', 'This project already has a subscription; manage it in the customer portal.');
  }
}

/** The project has no Stripe subscription (or Stripe no longer knows it): there is no billing to manage. */
export class NoSubscription extends ApiError {
  constructor() {
    super(409, 'no_subscription', 'This project has no subscription to manage.');
  }
}

/** The account still owns projects that have other members: each must be handed over or emptied first. */
export class OwnsProjects extends ApiError {
  /** The details name at most this many of the projects; the message gives their number. */
  static readonly MAX_DETAILS = 20;

  constructor(projects: { namespace: string; others: number }[]) {
    const n = projects.length;
    super(
      409,
      'owns_projects',
      `You own ${n} project${n === 1 ? '' : 's'} with other members; transfer ${n === 1 ? 'it' : 'them'} or remove ${n === 1 ? 'its' : 'their'} members first.`,
      projects.slice(0, OwnsProjects.MAX_DETAILS).map(({ namespace, others }) => ({
        path: `/projects/${namespace}`,
        message: `has ${others} other member${others === 1 ? '' : 's'}`,
      })),
    );
  }
}

/** An e-mail change's token (confirm or undo) that is unknown, used, replaced by a newer one, or expired. */
export class InvalidEmailToken extends ApiError {
  constructor() {
    super(400, 'invalid_email_token', "The e-mail link's token is unknown, used, replaced by a newer one or expired.");
  }
}

/** A password reset token that is unknown, used, replaced by a newer one, or expired. */
export class InvalidResetToken extends ApiError {
  constructor() {
    super(400, 'invalid_reset_token', 'The password reset token is unknown, used, replaced by a newer one or expired; ask for a new link.');
  }
}
