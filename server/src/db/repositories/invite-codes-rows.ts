/**
 * Invite codes, stored as the SHA-256 of their lower-cased form with their first characters as a
 * hint. Taking one use is a single conditional update, so racing callers for the last use never
 * both get it.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { InviteCode } from '../entities.js';
import { query } from '../raw.js';

/** A new code's row, written at once. */
export async function insertInviteCode(
  em: EntityManager,
  fields: { codeHash: string; hint: string; uses: number; expiresAt: Date | null },
): Promise<InviteCode> {
  const row = em.create(InviteCode, {
    codeHash: fields.codeHash,
    hint: fields.hint,
    usesTotal: fields.uses,
    usesLeft: fields.uses,
    expiresAt: fields.expiresAt,
  });
  await em.flush();
  return row;
}

/** Every code, newest first. */
export function allInviteCodes(em: EntityManager): Promise<InviteCode[]> {
  return em.find(InviteCode, {}, { orderBy: { createdAt: 'desc', id: 'desc' } });
}

const TAKE_USE = `update invite_codes set uses_left = uses_left - 1
  where code_hash = ? and uses_left > 0 and (expires_at is null or expires_at > now())
  returning id`;

/** Takes one use of the code hashing to `codeHash` if it has one left and has not expired; whether it did. */
export async function takeInviteCodeUse(em: EntityManager, codeHash: string): Promise<boolean> {
  return (await query(em, TAKE_USE, [codeHash])).length === 1;
}
