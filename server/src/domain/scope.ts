/**
 * What a domain module's method acts within: the request's unit of work (`em`, which a method may
 * hand on as a transaction of its own) and who asks (`caller`). A handler's own context has both, so
 * it may be passed as it is. Settings and services are not here: each module is built with them once
 * (services.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { User } from '../db/entities.js';
import type { CredentialKind } from '../db/repositories/accounts-rows.js';
import type { Grant } from '../policies/project.js';

/** Who asks: the credential a request presented, resolved (credentials.ts `resolveToken`). */
export interface Caller {
  /**
   * The caller's account, a managed entity of the request's entity manager, mapped on first use:
   * a request that needs only the id or the username (every read) never pays for the mapping.
   */
  readonly user: User;
  userId: string;
  username: string;
  kind: CredentialKind;
  /** The session's or API token's id. */
  credentialId: string;
  /** What the credential may do and where: everything its user may for a session, what it was made for for an API token. */
  grant: Grant;
}

export interface Scope {
  em: EntityManager;
  caller: Caller;
}

/**
 * The same caller acting within `em` (a transaction a method opened): named field by field, since
 * a handler's context reads its caller through a getter that a spread would call for nothing.
 */
export function within(scope: Scope, em: EntityManager): Scope {
  return { em, caller: scope.caller };
}
