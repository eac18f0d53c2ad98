/**
 * Credential → caller. `Authorization: Bearer <token>` or `Token <token>` (scheme word in any case);
 * anything else in that header, and any token that resolves to nobody, is 401. Which operations
 * need a credential, which refuse API tokens, and which scope an API token needs for each, is read
 * from the contract (`security`, `x-session-only`, `x-scope`), so the rule lives in the spec alone;
 * whether a token's scopes cover an operation is the policy's (policies/project.ts).
 *
 * Resolving and deciding are two steps so that the rate limit can count a request between them:
 * by its credential when one resolves, by its address when none does (http/rate-limit.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Forbidden, Unauthenticated } from '../errors.js';
import { resolveAuthorization, type Caller } from '../domain/credentials.js';
import { permitScope } from '../policies/project.js';
import type { ContractOperation } from './contract.js';

/**
 * The caller of an operation that needs one, if its credential resolves (to a promise of undefined
 * otherwise); undefined at once for a public operation, which looks at the header itself, if at
 * all, and for which `em` is never called. Never rejects for a bad credential: `authorize` throws,
 * once the request has been counted.
 */
export function identify(
  op: ContractOperation,
  header: string | undefined,
  em: () => EntityManager,
): Promise<Caller | undefined> | undefined {
  return op.isPublic ? undefined : resolveAuthorization(em(), header);
}

/**
 * 401 when the operation needs a caller and has none; 403 `session_required` when it needs a
 * session and has an API token, `insufficient_scope` when the API token's scopes do not cover it.
 * Decided on the credential and the operation alone, so a refusal tells nothing of the project a
 * path names, and comes before anything is read or done.
 */
export function authorize(op: ContractOperation, caller: Caller | undefined): Caller | undefined {
  if (op.isPublic) return undefined;
  if (!caller) throw new Unauthenticated();
  if (caller.kind === 'session') return caller;
  if (op.sessionOnly) throw new Forbidden('session_required', 'This route needs a session token; API tokens cannot use it.');
  permitScope(caller.grant, op.scope, op.namesProject);
  return caller;
}
