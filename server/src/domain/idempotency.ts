/**
 * `Idempotency-Key`s: the rules of a key's life, whatever the protocol (the request side, which
 * requests take keys and what makes two of them the same, is http/idempotency.ts).
 *
 * A key belongs to a user (a session and an API token of one user share keys; two users' keys
 * never meet) and lives `KEY_LIFETIME_MS` from its first use. Within that time it is held to the
 * request it was first used for (its fingerprint) and, once that request has answered, to its
 * answer; past it, the key counts as new, whatever it was used for. Keys are rows of the database,
 * so every instance sees every claim at once, and a claim is one statement, so of any number of
 * requests racing for a key on any number of instances one wins.
 *
 * A claim is a lease: an instance that dies while it holds a key cannot give it back, and a request
 * for the same key and fingerprint takes the key over once the lease has run out (`claimLeaseMs`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import {
  claimKey,
  findKey,
  recordAnswer,
  releaseKey,
  type KeyClaim,
  type KeyScope,
  type StoredAnswer,
} from '../db/repositories/idempotency-rows.js';
import { IdempotencyInProgress, IdempotencyKeyReused } from '../errors.js';

export type { KeyScope, StoredAnswer };

/** How long a key's first answer is kept, and the key held to the request it was first used for. */
export const KEY_LIFETIME_MS = 24 * 60 * 60_000;

/** Claims tried per request before giving up with 409: more are needed only while other requests keep giving the key back. */
const CLAIM_ATTEMPTS = 3;

/**
 * How long a claim holds its key against other requests. It must exceed the longest a request can
 * run, or a live request could be taken over and its work done twice. A write waits for and runs a
 * handful of statements in turn (the claim; the handler's locks, reads, writes and commit, a
 * publish first waiting for its project's previous group; the record), each bounded by
 * DB_ACQUIRE_TIMEOUT_MS and DB_STATEMENT_TIMEOUT_MS: twenty of both, 160 s by default, is far more
 * than any takes. A long lease costs only when an instance dies holding a key: retries of that key
 * are 409 until the lease runs out.
 */
export function claimLeaseMs(database: Config['database']): number {
  return 20 * (database.acquireTimeoutMs + database.statementTimeoutMs);
}

/**
 * Claims the key for a request: undefined once claimed. Otherwise the answer recorded for the same
 * request, to be replayed; 422 `idempotency_key_reused` when the key was first used for another
 * request; 409 `idempotency_in_progress` while the request holding it runs.
 */
export async function claimOrRecall(em: EntityManager, scope: KeyScope, request: KeyClaim): Promise<StoredAnswer | undefined> {
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    if (await claimKey(em, scope, request, KEY_LIFETIME_MS)) return undefined;
    const state = await findKey(em, scope, KEY_LIFETIME_MS);
    // Given back, expired, or its lease ran out between the two statements: claimable now.
    if (!state || (state.kind === 'running' && !state.leaseLive && state.fingerprint === request.fingerprint)) continue;
    if (state.fingerprint !== request.fingerprint) throw new IdempotencyKeyReused();
    if (state.kind === 'running') throw new IdempotencyInProgress();
    return state.answer;
  }
  throw new IdempotencyInProgress();
}

/**
 * Settles the claim once its request has run: an answer below 500 stays with the key (a retry gets
 * it again); a 5xx, or a request that ended without an answer, gives the key back, so a retry runs
 * afresh rather than replaying a fault.
 */
export async function settleKey(em: EntityManager, scope: KeyScope, claim: string, answer: StoredAnswer | undefined): Promise<void> {
  if (answer && answer.status < 500) await recordAnswer(em, scope, claim, answer);
  else await releaseKey(em, scope, claim);
}
