/**
 * Credential → caller. `Authorization: Bearer <token>` or `Token <token>` (scheme word in any case);
 * anything else in that header, and any token that resolves to nobody, is 401. Which operations
 * need a credential, and which refuse API tokens, is read from the contract (`security`,
 * `x-session-only`), so the rule lives in the spec alone.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Forbidden, Unauthenticated } from '../errors.js';
import { resolveToken, type Caller } from '../domain/credentials.js';
import type { ContractOperation } from './contract.js';

const AUTHORIZATION = /^(?:Bearer|Token) +([A-Za-z0-9_-]{1,200})$/i;

/** The caller behind an `Authorization` header: undefined when absent, 401 when present but not valid. */
export async function callerFromHeader(em: EntityManager, header: string | undefined): Promise<Caller | undefined> {
  if (header === undefined || header === '') return undefined;
  const token = AUTHORIZATION.exec(header.trim())?.[1];
  const caller = token ? await resolveToken(em, token) : undefined;
  if (!caller) throw new Unauthenticated();
  return caller;
}

export async function authenticate(em: EntityManager, op: ContractOperation, header: string | undefined): Promise<Caller | undefined> {
  if (op.isPublic) return undefined;
  const caller = await callerFromHeader(em, header);
  if (!caller) throw new Unauthenticated();
  if (op.sessionOnly && caller.kind !== 'session') {
    throw new Forbidden('session_required', 'This route needs a session token; API tokens cannot use it.');
  }
  return caller;
}
