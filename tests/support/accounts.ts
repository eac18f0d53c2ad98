/**
 * Accounts for the tests: unique names, invite codes straight from a server's database, sign-up
 * through the public route (of the run's server or of one a test started), and API tokens. Every
 * password, token and code made here is registered as a secret (harness.ts), so the end-of-run check
 * looks for it in the database and the log.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createInviteCode } from '../../server/src/domain/invite-codes.js';
import type { RunningServer } from '../../server/src/server.js';
import { baseUrl, client, database, secret } from './harness.js';
import { callAt } from './http.js';

/** The server an account is made on: its address and its database. */
export type Server = Pick<RunningServer, 'url' | 'db'>;

let counter = 0;

/** A name no other test uses (at most 32 characters: a valid username). */
export function uniqueName(prefix = 'user'): string {
  counter += 1;
  return `${prefix}_${process.pid % 1000}_${counter}_${randomBytes(2).toString('hex')}`.slice(0, 32);
}

/** A new invite code in the run's database, or in `db`. */
export async function inviteCode(options: { uses?: number; expiresInDays?: number } = {}, db: Server['db'] = database()): Promise<string> {
  const { code } = await createInviteCode(db.orm.em.fork(), options);
  return secret(code);
}

export interface TestUser {
  id: string;
  username: string;
  email: string;
  password: string;
  token: string;
}

export type SignUpOverrides = Partial<{ username: string; email: string; password: string; userAgent: string }>;

/** A new account on `server` through its public sign-up route, with an invite code of its own database. */
export async function signUpOn(server: Server, overrides: SignUpOverrides = {}): Promise<TestUser> {
  const username = overrides.username ?? uniqueName();
  const email = overrides.email ?? `${username}@example.com`;
  const password = secret(overrides.password ?? `pw-${randomBytes(8).toString('hex')}`);
  const body = { username, email, password, invite: await inviteCode({}, server.db) };
  const answer = await callAt(
    server.url,
    'POST',
    '/v1/auth/signup',
    undefined,
    body,
    overrides.userAgent ? { 'User-Agent': overrides.userAgent } : {},
  );
  expect(answer.status, `sign-up: ${answer.text}`).to.equal(201);
  return {
    id: answer.json.data.user.id,
    username: answer.json.data.user.username,
    email,
    password,
    token: secret(answer.json.data.token as string),
  };
}

/** A new account on the run's server. */
export function signUp(overrides: SignUpOverrides = {}): Promise<TestUser> {
  return signUpOn({ url: baseUrl(), db: database() }, overrides);
}

/** A new API token of the session's user. */
export async function apiToken(sessionToken: string, name = 'test token'): Promise<string> {
  const { data, error, response } = await client(sessionToken).POST('/v1/auth/tokens', { body: { name } });
  if (!data) throw new Error(`API token creation failed: ${response.status} ${JSON.stringify(error)}`);
  return secret(data.data.token);
}
