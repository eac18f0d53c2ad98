/**
 * Password reset tokens (table `password_reset_tokens`, one row per user; the flow is
 * domain/password-reset.ts). Every time is the database's clock, so the hour a token lives does not
 * depend on the clock of the instance that made it or of the one that takes it.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

/** A new token replaces the user's earlier one, used or not, in the same row. */
const ISSUE = `insert into password_reset_tokens as t (user_id, token_hash, created_at, expires_at, used_at)
  values (?, ?, now(), now() + ?::float8 * interval '1 millisecond', null)
  on conflict (user_id) do update
  set token_hash = excluded.token_hash, created_at = excluded.created_at, expires_at = excluded.expires_at, used_at = null`;

/** Issues the user's token, valid for `ttlMs` from now, in place of any earlier one. */
export async function issueResetToken(em: EntityManager, userId: string, tokenHash: string, ttlMs: number): Promise<void> {
  await query(em, ISSUE, [userId, tokenHash, ttlMs]);
}

/** One conditional update: of any number of racing takers of one token, exactly one gets its user. */
const TAKE = `update password_reset_tokens set used_at = now()
  where token_hash = ? and used_at is null and expires_at > now()
  returning user_id`;

/** Uses up the live token hashing to `tokenHash`: its user's id, or undefined when there is none (unknown, used, replaced, expired). */
export async function takeResetToken(em: EntityManager, tokenHash: string): Promise<string | undefined> {
  const [row] = await query<{ user_id: string }>(em, TAKE, [tokenHash]);
  return row?.user_id;
}

/** Voids the user's reset token, if any: a password or e-mail change ends every link made before it. */
export async function voidResetTokens(em: EntityManager, userId: string): Promise<void> {
  await query(em, 'delete from password_reset_tokens where user_id = ?', [userId]);
}

/** Sets the user's password hash. */
export async function setPasswordHash(em: EntityManager, userId: string, passwordHash: string): Promise<void> {
  await query(em, 'update users set password_hash = ?, updated_at = now() where id = ?', [passwordHash, userId]);
}

/** Deletes every session of the user: the ids of those it deleted. */
export async function deleteSessionsOf(em: EntityManager, userId: string): Promise<string[]> {
  return (await query<{ id: string }>(em, 'delete from sessions where user_id = ? returning id', [userId])).map((r) => r.id);
}
