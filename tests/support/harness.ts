/**
 * The server under test and the tools tests use on it: SDK clients, raw HTTP, direct database
 * reads (to assert what is or is not stored), and a register of every secret the run handled, which
 * is checked against the whole database and the server's log at the end.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { createClient, type SignalboardClient } from '../../sdk/src/index.js';
import { loadConfig } from '../../server/src/config.js';
import { createInviteCode } from '../../server/src/domain/invite-codes.js';
import { startServer, type RunningServer } from '../../server/src/server.js';

export const outputDir = path.resolve('.test-output');
const logFile = path.join(outputDir, 'server.log');

let server: RunningServer | undefined;
let cleanup: (() => Promise<void>) | undefined;
const secrets = new Set<string>();

export function baseUrl(): string {
  if (!server) throw new Error('the test server is not running');
  return server.url;
}

export function database(): RunningServer['db'] {
  if (!server) throw new Error('the test server is not running');
  return server.db;
}

async function freshPostgresDatabase(adminUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `sb_test_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      if (process.env.KEEP_TEST_DB) return;
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

/** The suite signs up hundreds of accounts from one address: its server runs without rate limits (tests/rate-limits.test.ts starts its own). */
const UNLIMITED = { AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '0' };

export async function startTestServer(): Promise<void> {
  mkdirSync(outputDir, { recursive: true });
  rmSync(logFile, { force: true });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-test-'));
  let databaseUrl: string | undefined;
  let dropDatabase = async () => {};
  if (process.env.DATABASE_URL) {
    const fresh = await freshPostgresDatabase(process.env.DATABASE_URL);
    databaseUrl = fresh.url;
    dropDatabase = fresh.drop;
  }
  const config = { ...loadConfig({ ...process.env, DATABASE_URL: databaseUrl ?? '', ...UNLIMITED }), port: 0, host: '127.0.0.1', dataDir };
  // Info level, to a file: the log is part of what the run checks for leaked secrets.
  const logger = pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true }));
  server = await startServer(config, logger);
  console.log(`\n  Tests run against: ${server.db.description}\n`);
  cleanup = async () => {
    await server?.close();
    await dropDatabase();
    rmSync(dataDir, { recursive: true, force: true });
  };
}

export async function stopTestServer(): Promise<void> {
  const description = server?.db.description;
  try {
    await assertNoSecretStored();
  } finally {
    await cleanup?.();
    server = undefined;
    if (description) console.log(`\n  Tests ran against: ${description}\n`);
  }
}

/** Any plain secret the run handled (password, token, invite code), as text in any table or log line, fails the run. */
async function assertNoSecretStored(): Promise<void> {
  if (!server || secrets.size === 0) return;
  const tables = (await sql<{ table_name: string }>(
    `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
  )).map((r) => r.table_name);
  const dump = [];
  for (const table of tables) dump.push(JSON.stringify(await sql(`select * from "${table}"`)));
  const stored = dump.join('\n');
  const logged = readFileSync(logFile, 'utf8');
  const leaks = [...secrets].filter((s) => stored.includes(s) || logged.includes(s));
  if (leaks.length > 0) throw new Error(`${leaks.length} plain secret(s) found in the database or the log`);
}

/** Remember a secret so that the end-of-run check looks for it. */
export function secret<T extends string>(value: T): T {
  secrets.add(value);
  return value;
}

export async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return (await database().orm.em.fork().getConnection().execute(text, params)) as T[];
}

export function client(token?: string): SignalboardClient {
  return createClient({ baseUrl: baseUrl(), ...(token ? { token } : {}) });
}

/** Raw HTTP, for what the SDK would hide: headers, malformed bodies, content types. */
export async function http(method: string, urlPath: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const response = await fetch(baseUrl() + urlPath, { method, headers: init.headers, body: init.body });
  const text = await response.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

export async function inviteCode(options: { uses?: number; expiresInDays?: number } = {}): Promise<string> {
  const { code } = await createInviteCode(database().orm.em.fork(), options);
  return secret(code);
}

let counter = 0;

export function uniqueName(prefix = 'user'): string {
  counter += 1;
  return `${prefix}_${process.pid % 1000}_${counter}_${randomBytes(2).toString('hex')}`.slice(0, 32);
}

export interface TestUser {
  id: string;
  username: string;
  email: string;
  password: string;
  token: string;
}

/** A new account through the public sign-up route. */
export async function signUp(overrides: Partial<{ username: string; email: string; password: string; userAgent: string }> = {}): Promise<TestUser> {
  const username = overrides.username ?? uniqueName();
  const email = overrides.email ?? `${username}@example.com`;
  const password = secret(overrides.password ?? `pw-${randomBytes(8).toString('hex')}`);
  const { data, error, response } = await client().POST('/v1/auth/signup', {
    body: { username, email, password, invite: await inviteCode() },
    ...(overrides.userAgent ? { headers: { 'User-Agent': overrides.userAgent } } : {}),
  });
  if (!data) throw new Error(`sign-up failed: ${response.status} ${JSON.stringify(error)}`);
  return { id: data.data.user.id, username: data.data.user.username, email, password, token: secret(data.data.token) };
}

/**
 * Another server beside the run's own, with `env` laid over the environment (Stripe settings, rate
 * limits: off unless `env` sets them). With DATABASE_URL it uses the run's PostgreSQL database; embedded, it gets a fresh
 * data folder of its own, since a PGlite folder has one owner. It logs to the run's log file, which
 * the end-of-run secret check reads. The caller closes it; closing also removes its data folder.
 */
export async function startExtraServer(env: Record<string, string> = {}): Promise<RunningServer> {
  const main = database();
  const databaseUrl = main.kind === 'postgresql' ? main.orm.config.get('clientUrl') : undefined;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-test-extra-'));
  const config = { ...loadConfig({ ...process.env, ...UNLIMITED, ...env, DATABASE_URL: databaseUrl ?? '' }), port: 0, host: '127.0.0.1', dataDir };
  const logger = pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true }));
  let extra: RunningServer;
  try {
    extra = await startServer(config, logger);
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    ...extra,
    close: async () => {
      await extra.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
