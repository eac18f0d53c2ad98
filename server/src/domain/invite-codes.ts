/**
 * Invite codes: the operator mints them (the code is shown once, only its hash is kept), and each
 * sign-up takes one use of one.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { anyUser } from '../db/repositories/accounts-rows.js';
import { allInviteCodes, insertInviteCode, takeInviteCodeUse } from '../db/repositories/invite-codes-rows.js';

/** Input that breaks a rule below; its message is fit to show to the operator as is. */
export class InviteCodeInputError extends Error {}

export interface CreateInviteCodeInput {
  /** How many accounts the code admits, 1–1,000,000; default 1. */
  uses?: number;
  /** Days until the code expires, 1–3650; omitted: never. */
  expiresInDays?: number;
}

/** A new code: `code` is shown this once and never stored. */
export interface CreatedInviteCode {
  code: string;
  id: string;
  hint: string;
  uses: number;
  expires_at: Date | null;
}

export interface InviteCodeRow {
  id: string;
  hint: string;
  uses_total: number;
  uses_left: number;
  expires_at: Date | null;
  created_at: Date;
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const DAY_MS = 86_400_000;

function integerIn(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InviteCodeInputError(`${name} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

/** 16 random bytes (128 bits) as 26 characters of lower-case base32. */
function randomBase32(): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of randomBytes(16)) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += BASE32[(value >>> bits) & 31];
    }
  }
  return out + BASE32[(value << (5 - bits)) & 31];
}

/** Codes are case-insensitive, so the hash is of the lower-cased form. */
export function hashInviteCode(code: string): string {
  return createHash('sha256').update(code.trim().toLowerCase()).digest('hex');
}

/** Applies the defaults and checks the ranges; throws InviteCodeInputError. */
export function checkCreateInviteCodeInput(input: CreateInviteCodeInput): { uses: number; expiresInDays: number | undefined } {
  return {
    uses: integerIn('uses', input.uses ?? 1, 1, 1_000_000),
    expiresInDays: input.expiresInDays === undefined ? undefined : integerIn('expires_in_days', input.expiresInDays, 1, 3650),
  };
}

export async function createInviteCode(em: EntityManager, input: CreateInviteCodeInput = {}): Promise<CreatedInviteCode> {
  const { uses, expiresInDays } = checkCreateInviteCodeInput(input);
  const expiresAt = expiresInDays === undefined ? null : new Date(Date.now() + expiresInDays * DAY_MS);
  const code = `inv_${randomBase32()}`;
  const row = await insertInviteCode(em, { codeHash: hashInviteCode(code), hint: code.slice(0, 8), uses, expiresAt });
  return { code, id: row.id, hint: row.hint, uses, expires_at: expiresAt };
}

/** How long the first run's code is good for: long enough to come back to, short enough not to linger in old logs. */
const FIRST_RUN_CODE_DAYS = 7;

/**
 * On a database that holds no account, a new code of one use, good for FIRST_RUN_CODE_DAYS days, to
 * create the first account with; undefined once any account exists. Minted at each start while no
 * account exists: codes of earlier starts stay valid until they expire, so the newest line of the
 * log always holds a code that works, and none is voided behind the operator's back.
 */
export async function firstRunInviteCode(em: EntityManager): Promise<CreatedInviteCode | undefined> {
  if (await anyUser(em)) return undefined;
  return createInviteCode(em, { uses: 1, expiresInDays: FIRST_RUN_CODE_DAYS });
}

export async function listInviteCodes(em: EntityManager): Promise<InviteCodeRow[]> {
  const rows = await allInviteCodes(em);
  return rows.map((r) => ({
    id: r.id,
    hint: r.hint,
    uses_total: r.usesTotal,
    uses_left: r.usesLeft,
    expires_at: r.expiresAt ?? null,
    created_at: r.createdAt,
  }));
}

/**
 * Takes one use of a code if it has one left and has not expired. A single conditional update, so
 * of any number of racing callers for the last use exactly one gets it, without any lock held in
 * the app. Pass the sign-up's transactional `em`, so a failed sign-up gives the use back.
 */
export async function redeemInviteCode(em: EntityManager, code: string): Promise<boolean> {
  return takeInviteCodeUse(em, hashInviteCode(code));
}
