/**
 * What the suites of sign-up, login and the credentials they give share (auth*.test.ts): the requests,
 * valid sign-up bodies, and the snapshot of every table a sign-up or login writes, which a refusal must
 * leave as it was.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { secret, sha256, sql } from '../support/harness.js';
import { inviteCode, uniqueName } from '../support/accounts.js';
import { call, expectError, http, type Answer } from '../support/http.js';

export const SESSION_TOKEN = /^ses_[A-Za-z0-9_-]{43}$/;

/** Invite codes are stored as the SHA-256 of their lower-cased form. */
export function inviteHash(code: string): string {
  return sha256(code.toLowerCase());
}

export async function usesLeft(code: string): Promise<number> {
  const rows = await sql<{ uses_left: number }>('select uses_left from invite_codes where code_hash = ?', [inviteHash(code)]);
  expect(rows, 'the invite code row').to.have.length(1);
  return rows[0]!.uses_left;
}

/** Row counts of every table a sign-up or login writes, and the uses left on all invite codes. */
export async function snapshot() {
  const [row] = await sql<{ users: number; sessions: number; api_tokens: number; uses_left: number }>(
    `select (select count(*)::int from users) as users,
            (select count(*)::int from sessions) as sessions,
            (select count(*)::int from api_tokens) as api_tokens,
            (select coalesce(sum(uses_left), 0)::int from invite_codes) as uses_left`,
  );
  return row!;
}

export async function usersNamed(username: string, email: string): Promise<number> {
  const [row] = await sql<{ n: number }>(
    'select count(*)::int as n from users where lower(username) = lower(?) or lower(email) = lower(?)',
    [username, email],
  );
  return row!.n;
}

export function newPassword(): string {
  return secret(`pw-${randomBytes(8).toString('hex')}`);
}

/** A complete, valid sign-up body with a fresh single-use invite code. */
export async function signupBody(overrides: Record<string, unknown> = {}) {
  const username = uniqueName();
  return { username, email: `${username}@example.com`, password: newPassword(), invite: await inviteCode(), ...overrides };
}

export function signup(body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call('POST', '/v1/auth/signup', undefined, body, headers);
}

export function login(body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call('POST', '/v1/auth/login', undefined, body, headers);
}

export function me(authorization?: string): Promise<Answer> {
  return http('GET', '/v1/users/me', authorization === undefined ? {} : { headers: { Authorization: authorization } });
}

/** A sign-up that must succeed (201); its session token is registered as a secret. */
export async function expectSignedUp(body: unknown): Promise<Answer> {
  const answer = await signup(body);
  expect(answer.status, answer.text).to.equal(201);
  secret(answer.json.data.token as string);
  return answer;
}

/** Sends a request that must be refused with `status` and `code`; no table a sign-up or login writes may change. */
export async function expectNothingStoredBy(send: () => Promise<Answer>, status: number, code: string): Promise<Answer> {
  const before = await snapshot();
  const answer = await send();
  expectError(answer, status, code);
  expect(await snapshot()).to.deep.equal(before);
  return answer;
}
