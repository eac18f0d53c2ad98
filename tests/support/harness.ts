/**
 * The server under test and what the tests read of it directly: its address, its database (to assert
 * what is or is not stored), SDK clients, other servers beside it, and a register of every secret
 * the run handled, which is checked against the whole database and the server's log at the end.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { createRawClient, type RawClient } from '../../sdk/src/index.js';
import { loadConfig } from '../../server/src/config.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { freshDatabase } from './pg-cluster.js';
import { serviceDatabaseEnv } from './pgbouncer.js';

export const outputDir = path.resolve('.test-output');
const logFile = path.join(outputDir, 'server.log');

let server: RunningServer | undefined;
/** How the run's server reaches its database (pgbouncer.ts `serviceDatabaseEnv`), for the servers started beside it. */
let serverDatabaseEnv: Record<string, string> = { DATABASE_URL: '' };
const secrets = new Set<string>();

export function baseUrl(): string {
  if (!server) throw new Error('the test server is not running');
  return server.url;
}

export function database(): RunningServer['db'] {
  if (!server) throw new Error('the test server is not running');
  return server.db;
}

/** A new database on the PostgreSQL server of `adminUrl`, and how to drop it (unless KEEP_TEST_DB is set). */
export async function freshPostgresDatabase(adminUrl: string, prefix = 'sb_test'): Promise<{ url: string; drop: () => Promise<void> }> {
  const fresh = await freshDatabase(adminUrl, prefix);
  return { url: fresh.url, drop: () => (process.env.KEEP_TEST_DB ? Promise.resolve() : fresh.drop()) };
}

/**
 * The suite signs up hundreds of accounts from one address: its server runs without rate limits
 * (tests/http/rate-limits.test.ts starts servers of its own).
 */
/**
 * What the run's servers start with unless a test says otherwise: rate limits off, and bcrypt at its
 * lowest cost (4), since every sign-up and login of the run pays it (at the default 10, the pure
 * JavaScript hash takes 100-200 ms on a 2-core machine). Tests about the hash's cost set their own.
 */
const TEST_DEFAULTS = { AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '0', CDN_RATE_LIMIT: '0', BCRYPT_ROUNDS: '4' };

/** A server a test started, and its data folder. */
export type TestServer = RunningServer & { dataDir: string };

/**
 * startServer with `env` as its environment, on 127.0.0.1 and a free port, in `dataDir` (by default
 * a new temporary folder); closing it also removes the folder and then runs `afterClose` (which also
 * runs when the start fails).
 */
export async function startServerIn(
  prefix: string,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  afterClose = async () => {},
  dataDir = mkdtempSync(path.join(os.tmpdir(), `${prefix}-`)),
): Promise<TestServer> {
  const removeAll = async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await afterClose();
  };
  let started: RunningServer;
  try {
    started = await startServer({ ...loadConfig(env), port: 0, host: '127.0.0.1', dataDir }, logger);
  } catch (error) {
    await removeAll().catch(() => {});
    throw error;
  }
  return {
    ...started,
    dataDir,
    close: async () => {
      await started.close();
      await removeAll();
    },
  };
}

/** Info level, to the run's log file: the log is part of what the run checks for leaked secrets. */
function runLogger(): Logger {
  return pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true }));
}

/**
 * The run's server, on a fresh database. That database holds no account when it starts, so the
 * server logs a first-run invite code (server.ts `announceFirstRun`): a code made to be printed,
 * which is not registered as a secret; tests/accounts/cookie-sessions.test.ts checks that line on a
 * server of its own that logs elsewhere.
 */
export async function startTestServer(): Promise<void> {
  mkdirSync(outputDir, { recursive: true });
  rmSync(logFile, { force: true });
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase(process.env.DATABASE_URL) : undefined;
  if (fresh) serverDatabaseEnv = await serviceDatabaseEnv(fresh.url);
  server = await startServerIn('signalboard-test', { ...process.env, ...serverDatabaseEnv, ...TEST_DEFAULTS }, runLogger(), fresh?.drop);
  console.log(`\n  Tests run against: ${server.db.description}, on Node.js ${process.version}\n`);
}

export async function stopTestServer(): Promise<void> {
  const description = server?.db.description;
  try {
    await assertNoSecretStored();
  } finally {
    await server?.close();
    server = undefined;
    if (description) console.log(`\n  Tests ran against: ${description}\n`);
  }
}

/** Any plain secret the run handled (password, token, invite code), as text in any table or log line, fails the run. */
async function assertNoSecretStored(): Promise<void> {
  if (!server || secrets.size === 0) return;
  const tables = (
    await sql<{ table_name: string }>(
      `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
    )
  ).map((r) => r.table_name);
  // Read in one transaction without the service's statement timeout: by the end of a run the events
  // table holds tens of thousands of rows, which a busy machine may not read within 5 s.
  const dump: string[] = [];
  await database()
    .orm.em.fork()
    .transactional(async (tx) => {
      const connection = tx.getConnection();
      const context = tx.getTransactionContext();
      await connection.execute('set local statement_timeout = 0', [], 'run', context);
      for (const table of tables) dump.push(JSON.stringify(await connection.execute(`select * from "${table}"`, [], 'all', context)));
    });
  const stored = dump.join('\n');
  const logged = readFileSync(logFile, 'utf8');
  // One pass of one pattern over each text: a run handles thousands of secrets and stores tens of
  // megabytes, and a search of everything per secret grew with the product of the two.
  const anySecret = new RegExp([...secrets].map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'));
  if (!anySecret.test(stored) && !anySecret.test(logged)) return;
  const leaks = [...secrets].filter((s) => stored.includes(s) || logged.includes(s));
  throw new Error(`${leaks.length} plain secret(s) found in the database or the log`);
}

/**
 * Remember a secret so that the end-of-run check looks for it. Undefined (a session token the answer
 * left out, as with `cookie: true`) fails the test that expected one.
 */
export function secret<T extends string>(value: T | undefined): T {
  if (value === undefined) throw new Error('a secret the test expected (a token, a code) is absent');
  secrets.add(value);
  return value;
}

/** A statement on the run's database, or on `db` (an extra server's, which embedded is a database of its own). */
export async function sql<T = Record<string, unknown>>(
  text: string,
  params: unknown[] = [],
  db: RunningServer['db'] = database(),
): Promise<T[]> {
  return db.orm.em.fork().getConnection().execute<T[]>(text, params);
}

/** The first column of the first row, as a number: `select count(*)::int as n …`. */
export async function count(text: string, params: unknown[] = [], db: RunningServer['db'] = database()): Promise<number> {
  const [row] = await sql<Record<string, unknown>>(text, params, db);
  return Number(Object.values(row!)[0]);
}

/** Hex SHA-256: what the service stores instead of a token or an invite code, and names an icon by. */
export function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The SDK's low-level client, answering every status as is: no retries, so a test sees each answer. */
export function client(token?: string): RawClient {
  return createRawClient({ baseUrl: baseUrl(), token, maxRetries: 0 });
}

/**
 * Another server beside the run's own, with `env` laid over the environment (Stripe settings, rate
 * limits: off unless `env` sets them). With DATABASE_URL it uses the run's PostgreSQL database; embedded, it gets a fresh
 * data folder of its own, since a PGlite folder has one owner (`dataDir`, when given, is that folder). It logs to the
 * run's log file, which the end-of-run secret check reads. The caller closes it; closing also removes its data folder.
 */
export function startExtraServer(env: Record<string, string> = {}, dataDir?: string): Promise<TestServer> {
  if (!server) throw new Error('the test server is not running');
  const environment = { ...process.env, ...TEST_DEFAULTS, ...env, ...serverDatabaseEnv };
  return startServerIn('signalboard-test-extra', environment, runLogger(), undefined, dataDir);
}

/**
 * An extra server whose rate limits (set in `env`) start from no counts. With PostgreSQL the
 * counters live in the run's database, shared by every server of the run, so a test that spent an
 * address's limit a moment ago would leave it spent for the next: they are emptied first (the run's
 * own server has the limits off and counts nothing).
 */
export async function startRateLimitedServer(env: Record<string, string>): Promise<TestServer> {
  if (database().kind === 'postgresql') await sql('delete from rate_limits');
  return startExtraServer(env);
}
