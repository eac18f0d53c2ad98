/** Taking one use of an invite code: a single conditional update, so racing callers for the last use never both get it. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

const TAKE_USE = `update invite_codes set uses_left = uses_left - 1
  where code_hash = ? and uses_left > 0 and (expires_at is null or expires_at > now())
  returning id`;

/** Takes one use of the code hashing to `codeHash` if it has one left and has not expired; whether it did. */
export async function takeInviteCodeUse(em: EntityManager, codeHash: string): Promise<boolean> {
  return (await query(em, TAKE_USE, [codeHash])).length === 1;
}
