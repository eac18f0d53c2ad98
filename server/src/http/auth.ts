/**
 * Credential → caller. `Authorization: Bearer <token>` or `Token <token>` (scheme word in any case);
 * anything else in that header, and any token that resolves to nobody, is 401. Without that header,
 * the session cookie (http/session-cookie.ts: `sb_session`, `__Host-sb_session` over HTTPS) stands
 * for a session, but only on a request from the service's own origin: from another it is 403
 * `csrf_refused`, decided without reading the database; a cookie that names no live session is 401
 * and is cleared; two or more are 401 and left alone. With the header, the cookie is not looked at. Which operations need a credential, which refuse API tokens, and which scope an
 * API token needs for each, is read from the contract (`security`, `x-session-only`, `x-scope`), so
 * the rule lives in the spec alone; whether a token's scopes cover an operation is the policy's
 * (policies/project.ts).
 *
 * Resolving and deciding are two steps so that the rate limit can count a request between them:
 * by its credential when one resolves, by its address when none does (http/rate-limit.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Context } from 'koa';
import { CsrfRefused, Forbidden, Unauthenticated } from '../errors.js';
import { resolveAuthorization, resolveToken } from '../domain/credentials.js';
import type { Caller } from '../domain/scope.js';
import { permitScope } from '../policies/project.js';
import type { ContractOperation } from './contract-operation.js';
import { clearedSessionCookie, fromOwnOrigin, SEVERAL_SESSION_COOKIES, sessionCookieOf } from './session-cookie.js';

/** What a request presents as its credential. */
export type Presented =
  | { via: 'authorization'; header: string }
  /** The session cookie from the service's own origin; `secure`: over HTTPS, for the cookie that clears it. */
  | { via: 'cookie'; token: string; secure: boolean }
  /** The cookie from a page of another origin: refused. */
  | { via: 'cross-origin cookie' }
  /** The session cookie more than once, from the service's own origin: refused. */
  | { via: 'several cookies' }
  | { via: 'nothing' };

const NOTHING: Presented = { via: 'nothing' };
const CROSS_ORIGIN: Presented = { via: 'cross-origin cookie' };
const SEVERAL_COOKIES: Presented = { via: 'several cookies' };
const NO_CALLER = Promise.resolve(undefined);
const SEVERAL_COOKIES_MESSAGE =
  'The request carried more than one session cookie, so none was used; clear this site’s cookies and sign in again.';

/** The request's credential: its `Authorization` header (`header`, the raw value) if it has one, else its session cookie, if any. */
export function presented(ctx: Context, header: string | undefined): Presented {
  if (header !== undefined) return { via: 'authorization', header };
  const token = sessionCookieOf(ctx);
  if (token === undefined) return NOTHING;
  if (!fromOwnOrigin(ctx)) return CROSS_ORIGIN;
  return token === SEVERAL_SESSION_COOKIES ? SEVERAL_COOKIES : { via: 'cookie', token, secure: ctx.secure };
}

/**
 * The caller of an operation that needs one, if its credential resolves (to a promise of undefined
 * otherwise); undefined at once for a public operation, which looks at the header itself, if at
 * all, and for which `em` is never called. Never rejects for a bad credential: `authorize` throws,
 * once the request has been counted.
 */
export function identify(op: ContractOperation, credential: Presented, em: () => EntityManager): Promise<Caller | undefined> | undefined {
  if (op.isPublic) return undefined;
  switch (credential.via) {
    case 'authorization':
      return resolveAuthorization(em(), credential.header);
    case 'cookie':
      // A cookie holds a session or nothing: an API token put there by hand is not looked up.
      return credential.token === '' ? NO_CALLER : resolveToken(em(), credential.token);
    default:
      return NO_CALLER;
  }
}

/**
 * 403 `csrf_refused` for a session cookie from another origin; 401 for several session cookies,
 * clearing none: clearing ours would leave the one another origin set (at a path or domain of its
 * choosing) as the only one, and the next request would be in its session; 401 when the operation
 * needs a caller and has none (clearing a cookie that named no live session); 403 `session_required` when
 * it needs a session and has an API token, `insufficient_scope` when the API token's scopes do not
 * cover it. Decided on the credential and the operation alone, so a refusal tells nothing of the
 * project a path names, and comes before anything is read or done.
 */
export function authorize(op: ContractOperation, caller: Caller | undefined, credential: Presented): Caller | undefined {
  if (op.isPublic) return undefined;
  if (credential.via === 'cross-origin cookie') throw new CsrfRefused();
  if (credential.via === 'several cookies') throw new Unauthenticated('unauthenticated', SEVERAL_COOKIES_MESSAGE);
  if (!caller) {
    if (credential.via !== 'cookie') throw new Unauthenticated();
    throw new Unauthenticated(undefined, undefined, { 'Set-Cookie': clearedSessionCookie(credential.secure) });
  }
  if (caller.kind === 'session') return caller;
  if (op.sessionOnly) throw new Forbidden('session_required', 'This route needs a session token; API tokens cannot use it.');
  permitScope(caller.grant, op.scope, op.namesProject);
  return caller;
}
