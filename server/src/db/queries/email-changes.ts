/**
 * An e-mail change's tokens (tables `email_changes` and `email_reverts`; the flow is
 * domain/email-change.ts). Every time is the database's clock, as for reset tokens.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

/** A new request replaces the user's pending change, its address and its token. */
const REQUEST = `insert into email_changes (user_id, new_email, token_hash, created_at, expires_at)
  values (?, ?, ?, now(), now() + ?::float8 * interval '1 millisecond')
  on conflict (user_id) do update
  set new_email = excluded.new_email, token_hash = excluded.token_hash, created_at = excluded.created_at, expires_at = excluded.expires_at`;

/** Records the user's pending change to `newEmail`, valid for `ttlMs` from now, in place of any earlier one. */
export async function requestEmailChange(
  em: EntityManager,
  userId: string,
  newEmail: string,
  tokenHash: string,
  ttlMs: number,
): Promise<void> {
  await query(em, REQUEST, [userId, newEmail, tokenHash, ttlMs]);
}

/** A new token, valid for `ttlMs` from now, for the user's pending change: its address, or undefined when none is pending. */
export async function reissueEmailChange(em: EntityManager, userId: string, tokenHash: string, ttlMs: number): Promise<string | undefined> {
  const [row] = await query<{ new_email: string }>(
    em,
    `update email_changes set token_hash = ?, expires_at = now() + ?::float8 * interval '1 millisecond'
     where user_id = ? returning new_email`,
    [tokenHash, ttlMs, userId],
  );
  return row?.new_email;
}

/** Deleting the row is taking it: of racing takers of one token, exactly one gets the change. */
const TAKE_CHANGE = `delete from email_changes where token_hash = ? and expires_at > now() returning user_id, new_email`;

/** Uses up the live change token hashing to `tokenHash`: its user and new address, or undefined. */
export async function takeEmailChange(em: EntityManager, tokenHash: string): Promise<{ user_id: string; new_email: string } | undefined> {
  const [row] = await query<{ user_id: string; new_email: string }>(em, TAKE_CHANGE, [tokenHash]);
  return row;
}

/** Voids the user's pending change, if any. */
export async function voidEmailChange(em: EntityManager, userId: string): Promise<void> {
  await query(em, 'delete from email_changes where user_id = ?', [userId]);
}

/**
 * Makes room for one more undo token of the user: deletes its spent and expired ones, and past
 * `keep - 1` live ones the newest, never the oldest. The oldest is the owner's way back from the
 * first change someone else made; later changes' undo links went to that someone's addresses.
 */
export async function makeRoomForEmailRevert(em: EntityManager, userId: string, keep: number): Promise<void> {
  await query(em, 'delete from email_reverts where user_id = ? and (used_at is not null or expires_at <= now())', [userId]);
  await query(
    em,
    `delete from email_reverts where token_hash in
       (select token_hash from email_reverts where user_id = ? order by created_at, token_hash offset ?)`,
    [userId, keep - 1],
  );
}

/** Records an undo token for the user that restores `oldEmail`, valid for `ttlMs` from now. */
export async function issueEmailRevert(
  em: EntityManager,
  userId: string,
  oldEmail: string,
  tokenHash: string,
  ttlMs: number,
): Promise<void> {
  await query(
    em,
    `insert into email_reverts (token_hash, user_id, old_email, created_at, expires_at, used_at)
     values (?, ?, ?, now(), now() + ?::float8 * interval '1 millisecond', null)`,
    [tokenHash, userId, oldEmail, ttlMs],
  );
}

/** One conditional update: of racing takers of one undo token, exactly one gets its user and address. */
const TAKE_REVERT = `update email_reverts set used_at = now()
  where token_hash = ? and used_at is null and expires_at > now()
  returning user_id, old_email`;

export async function takeEmailRevert(em: EntityManager, tokenHash: string): Promise<{ user_id: string; old_email: string } | undefined> {
  const [row] = await query<{ user_id: string; old_email: string }>(em, TAKE_REVERT, [tokenHash]);
  return row;
}

/** Sets the user's e-mail address: the address it replaced and the user's username, or undefined when there is no such user. */
export async function setEmail(
  em: EntityManager,
  userId: string,
  email: string,
): Promise<{ old_email: string; username: string } | undefined> {
  const [row] = await query<{ old_email: string; username: string }>(
    em,
    `update users u set email = ?, updated_at = now() from users old
     where u.id = ? and old.id = u.id returning old.email as old_email, u.username`,
    [email, userId],
  );
  return row;
}
