/**
 * What a domain module's method acts within: the request's unit of work (`em`, which a method may
 * hand on as a transaction of its own) and who asks (`caller`). A handler's own context has both, so
 * it may be passed as it is. Settings and services are not here: each module is built with them once
 * (services.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Caller } from './credentials.js';

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
