/**
 * A refused request's problems as the envelope's `details`, and the 400 that carries them. Kept
 * apart from the checks that find the problems (hostile-input.ts, validation.ts) because a client
 * reads only this: each problem is a JSON pointer into the request (`/body/name`, `/query/limit`,
 * `/headers/Idempotency-Key`) with a short message, at most MAX_DETAILS of them, each listed once,
 * and no pointer longer than MAX_POINTER_LENGTH, whatever ajv found or however long a field name
 * the request made up.
 */
import type { ErrorObject } from 'ajv';
import { InvalidRequest, type ErrorDetail } from '../errors.js';

/** The most problems one answer lists (the contract's `ErrorBody.details` has `maxItems: 20`). */
export const MAX_DETAILS = 20;
/** A path in `details` is cut to this many characters: a field name can be as long as the body. */
const MAX_POINTER_LENGTH = 200;

/** A key as one reference token of a JSON pointer (RFC 6901: `~` is `~0`, `/` is `~1`). */
export function escapeKey(key: string): string {
  // Nearly every key has neither character: checked before the two replacements are paid for.
  if (!key.includes('~') && !key.includes('/')) return key;
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A pointer as `details` shows it: cut to MAX_POINTER_LENGTH characters. */
export function pointer(path: string): string {
  return path.length > MAX_POINTER_LENGTH ? `${path.slice(0, MAX_POINTER_LENGTH)}…` : path;
}

/** ajv's errors, in their order, as at most MAX_DETAILS distinct details. */
export function detailsOf(errors: ErrorObject[]): ErrorDetail[] {
  return dedupe(errors.map(toDetail)).slice(0, MAX_DETAILS);
}

/** The 400 for a request that fails validation: the first problem in the message, all in `details`. */
export function invalidRequest(details: ErrorDetail[]): InvalidRequest {
  const [first] = details;
  const more = details.length > 1 ? ` (and ${details.length - 1} more, see details)` : '';
  return new InvalidRequest(`Invalid request: ${first?.path} ${first?.message}${more}.`, details);
}

/**
 * One ajv error as a detail. openapi-backend validates `{ path, query, header, cookie, requestBody }`:
 * its `requestBody` and `header` are the request's `body` and `headers`, and a missing field or an
 * unknown one is pointed at by its own name.
 */
function toDetail(error: ErrorObject): ErrorDetail {
  const where = error.instancePath.replace(/^\/requestBody/, '/body').replace(/^\/header\//, '/headers/');
  const params = error.params as { additionalProperty?: string; missingProperty?: string };
  if (error.keyword === 'additionalProperties') {
    return { path: pointer(`${where}/${escapeKey(params.additionalProperty ?? '')}`), message: 'is not a field of this request' };
  }
  if (error.keyword === 'required') {
    if (where === '' && params.missingProperty === 'requestBody') return { path: '/body', message: 'a JSON body is required' };
    return { path: pointer(`${where}/${params.missingProperty}`), message: 'is required' };
  }
  return { path: pointer(where || '/body'), message: error.message ?? 'is invalid' };
}

function dedupe(details: ErrorDetail[]): ErrorDetail[] {
  const seen = new Set<string>();
  return details.filter((d) => {
    const key = `${d.path}\u0000${d.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
