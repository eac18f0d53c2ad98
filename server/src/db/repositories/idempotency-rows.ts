/**
 * The statements of `Idempotency-Key`s (table `idempotency_keys`; the flow is http/idempotency.ts).
 * Each runs on its own, never inside the request's transaction: a claim must be seen by every
 * instance at once, and must outlast a transaction that rolls back. (`forgetKeysIn` is the one that
 * runs inside a transaction: a departure's, whose fate its keys share.) Every time is the database's
 * clock (`now()`), so instances whose clocks differ agree on what is expired.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

/** A user's key, as the table is keyed. */
export interface KeyScope {
  userId: string;
  key: string;
  /** The project the request names in its path, if any: its keys end with the user's membership there (`forgetKeysIn`). */
  namespace?: string | undefined;
}

/** The answer recorded for a key: `body` is the JSON sent, null for a 204. */
export interface StoredAnswer {
  status: number;
  body: string | null;
}

/** What a key that could not be claimed holds. */
export type KeyState =
  { kind: 'answered'; fingerprint: string; answer: StoredAnswer } | { kind: 'running'; fingerprint: string; leaseLive: boolean };

// A new key is inserted. A key already there is taken over only when it is past its lifetime (it
// counts as new, whatever it was used for), or when it is still unanswered past its lease and
// claimed again for the same request (the instance handling it is presumed gone). The one-statement
// upsert settles a race between instances: one claim wins, the others find its row.
const CLAIM = `insert into idempotency_keys as k (user_id, key, fingerprint, created_at, claim, lease_until, project_id)
  values (?, ?, ?, now(), ?, now() + ?::float8 * interval '1 millisecond', (select id from projects where namespace = ?))
  on conflict (user_id, key) do update
    set fingerprint = excluded.fingerprint, created_at = excluded.created_at, claim = excluded.claim, project_id = excluded.project_id,
      lease_until = excluded.lease_until, status = null, body = null
    where k.created_at <= now() - ?::float8 * interval '1 millisecond'
      or (k.claim is not null and k.lease_until <= now() and k.fingerprint = excluded.fingerprint)
  returning true as claimed`;

/** A request's claim on a key: what the request is, the claim's own id, and how long the claim holds. */
export interface KeyClaim {
  fingerprint: string;
  /** An id of the request's own, which recording and releasing name. */
  claim: string;
  leaseMs: number;
}

/**
 * Claims the key for a request; true when it is now the request's, false when another request
 * holds it or has answered it within `lifetimeMs`.
 */
export async function claimKey(
  em: EntityManager,
  scope: KeyScope,
  { fingerprint, claim, leaseMs }: KeyClaim,
  lifetimeMs: number,
): Promise<boolean> {
  const rows = await query(em, CLAIM, [scope.userId, scope.key, fingerprint, claim, leaseMs, scope.namespace ?? null, lifetimeMs]);
  return rows.length > 0;
}

const FIND = `select fingerprint, status, body, lease_until > now() as lease_live from idempotency_keys
  where user_id = ? and key = ? and created_at > now() - ?::float8 * interval '1 millisecond'`;

/** The key within its lifetime, or undefined when it has none (never used, released, or expired). */
export async function findKey(em: EntityManager, scope: KeyScope, lifetimeMs: number): Promise<KeyState | undefined> {
  const [row] = await query<{ fingerprint: string; status: number | null; body: string | null; lease_live: boolean | null }>(em, FIND, [
    scope.userId,
    scope.key,
    lifetimeMs,
  ]);
  if (!row) return undefined;
  if (row.status === null) return { kind: 'running', fingerprint: row.fingerprint, leaseLive: row.lease_live === true };
  return { kind: 'answered', fingerprint: row.fingerprint, answer: { status: row.status, body: row.body } };
}

// `claim = ?`: a request that outlived its lease and was taken over records and releases nothing
// of the request that took over.
const RECORD = `update idempotency_keys set status = ?, body = ?, claim = null, lease_until = null
  where user_id = ? and key = ? and claim = ?`;

/** Records the answer of the request holding `claim`. */
export async function recordAnswer(em: EntityManager, scope: KeyScope, claim: string, answer: StoredAnswer): Promise<void> {
  await query(em, RECORD, [answer.status, answer.body, scope.userId, scope.key, claim]);
}

const RELEASE = 'delete from idempotency_keys where user_id = ? and key = ? and claim = ?';

/** Gives up the claim: the key is free again, as if never used. */
export async function releaseKey(em: EntityManager, scope: KeyScope, claim: string): Promise<void> {
  await query(em, RELEASE, [scope.userId, scope.key, claim]);
}

// Oldest first on the created_at index: the keys' row ids come first (an InitPlan walking the
// index, locking as it goes), then the delete finds them by those ids, a plan a prepared
// statement's generic plan keeps (`in (select …)` may become a scan of the whole table). Rows a
// claim is taking over right now are skipped rather than waited for (taken over, they are no
// longer expired).
const PRUNE = `with gone as (
    delete from idempotency_keys where ctid = any(array(
      select ctid from idempotency_keys where created_at <= now() - ?::float8 * interval '1 millisecond'
      order by created_at limit ? for update skip locked
    )) returning 1
  )
  select count(*)::int as n from gone`;

/** Deletes at most `limit` keys past `lifetimeMs`, oldest first; how many it deleted. */
export async function deleteExpiredKeys(em: EntityManager, lifetimeMs: number, limit: number): Promise<number> {
  const [row] = await query<{ n: number }>(em, PRUNE, [lifetimeMs, limit]);
  return row!.n;
}

/**
 * Deletes the user's keys of requests that named the project, as the user's membership there
 * ends (in the departure's transaction): no answer recorded there is replayed to a non-member. A
 * request holding one of them meanwhile records nothing (`RECORD` finds no row).
 */
export async function forgetKeysIn(em: EntityManager, departure: { projectId: string; userId: string }): Promise<void> {
  await query(em, 'delete from idempotency_keys where user_id = ? and project_id = ?', [departure.userId, departure.projectId]);
}
