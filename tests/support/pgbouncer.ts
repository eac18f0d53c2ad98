/**
 * PgBouncer (Debian's package, 1.18 here) in transaction mode on a free port in front of a PostgreSQL
 * server, set up as a managed database's pooler usually is: every transaction may run on another
 * server session, and startup parameters other than `extra_float_digits` and `options` are refused.
 * It refuses to run as root: then it runs as the `postgres` user, in a folder handed over to it.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './pg-cluster.js';

export interface Pooler {
  port: number;
  /** `databaseUrl` (a URL of the server behind the pooler) with the pooler's address instead. */
  through(databaseUrl: string): string;
  /** The pooler's log so far, for a failure's message. */
  log(): string;
  stop(): Promise<void>;
}

const CANDIDATES = [process.env.PGBOUNCER_BIN, '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];

/** The pgbouncer binary, or undefined with the reason. */
export function findPgBouncer(): { bin?: string; reason?: string } {
  const bin = CANDIDATES.find((candidate) => candidate && existsSync(candidate));
  return bin ? { bin } : { reason: 'no pgbouncer binary (apt-get install -y pgbouncer, or PGBOUNCER_BIN)' };
}

/** The uid and gid to run as: this process's own, or the `postgres` user's when this process is root. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

async function accepting(url: string, deadline: number, child: ChildProcess, logFile: string): Promise<void> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}: ${readLog(logFile)}`);
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`pgbouncer did not serve ${url} within 15 s`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

function readLog(logFile: string): string {
  return existsSync(logFile) ? readFileSync(logFile, 'utf8') : '(no log)';
}

/**
 * Starts PgBouncer in transaction mode in front of the server of `serverUrl` (trust authentication,
 * as the test server has), serving every database of it under its own name, with at most `poolSize`
 * server sessions per database and user.
 */
export async function startPgBouncer(bin: string, serverUrl: string, options: { poolSize?: number } = {}): Promise<Pooler> {
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username) || os.userInfo().username;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-pgbouncer-'));
  const owner = runAs();
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const port = await freePort();
  const logFile = path.join(dir, 'pgbouncer.log');
  const users = ['postgres', 'root', user];
  writeFileSync(path.join(dir, 'users.txt'), [...new Set(users)].map((name) => `"${name}" ""\n`).join(''));
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname || '127.0.0.1'} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      'ignore_startup_parameters = extra_float_digits,options',
      `default_pool_size = ${options.poolSize ?? 10}`,
      'max_client_conn = 1000',
      `logfile = ${logFile}`,
      '',
    ].join('\n'),
  );
  const child = spawn(bin, [path.join(dir, 'pgbouncer.ini')], { stdio: 'ignore', ...(owner ?? {}) });
  child.on('error', () => undefined);
  // The test process may end with it running: the process's 'exit' stops it (`poolerFor`).
  child.unref();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const through = (databaseUrl: string) => {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(port);
    return url.toString();
  };
  // All but the wait is synchronous, so that a process's 'exit' handler may stop it too.
  const stop = async () => {
    const running = child.exitCode === null && child.signalCode === null;
    if (running) child.kill('SIGINT');
    rmSync(dir, { recursive: true, force: true });
    if (running) await exited;
  };
  try {
    await accepting(through(serverUrl), Date.now() + 15_000, child, logFile);
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, through, log: () => readLog(logFile), stop };
}

/**
 * `TEST_POOLER=1`: the services the tests start on a PostgreSQL database reach it through PgBouncer
 * in transaction mode (`DATABASE_URL`), and reach the database itself only for what needs a session
 * of its own (`DATABASE_DIRECT_URL`).
 */
export const throughPooler = process.env.TEST_POOLER === '1';

/** The process's poolers, one per PostgreSQL server, each started at first use and ended with the process. */
const poolers = new Map<string, Promise<Pooler>>();

function poolerFor(databaseUrl: string): Promise<Pooler> {
  const server = new URL(databaseUrl);
  const key = `${server.hostname}:${server.port}`;
  let pooler = poolers.get(key);
  if (!pooler) {
    const { bin, reason } = findPgBouncer();
    if (!bin) throw new Error(`TEST_POOLER=1, but ${reason}`);
    pooler = startPgBouncer(bin, databaseUrl);
    poolers.set(key, pooler);
    pooler.then(
      (started) => process.once('exit', () => void started.stop()),
      () => undefined,
    );
  }
  return pooler;
}

/**
 * The environment that puts a service on the database of `databaseUrl`: that URL as it is, or with
 * TEST_POOLER=1 the pooler in front of it, the database itself as the direct URL, and the database's
 * `statement_timeout` default set to the service's bound (what an operator sets per role, since the
 * pooler drops the setting the service connects with).
 */
export async function serviceDatabaseEnv(
  databaseUrl: string,
  statementTimeoutMs = Number(process.env.DB_STATEMENT_TIMEOUT_MS || 5_000),
): Promise<{ DATABASE_URL: string; DATABASE_DIRECT_URL: string }> {
  if (!throughPooler) return { DATABASE_URL: databaseUrl, DATABASE_DIRECT_URL: '' };
  // Before the pooler's first session to the database, which would keep the default it started with.
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const name = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
    await client.query(`alter database ${client.escapeIdentifier(name)} set statement_timeout = ${statementTimeoutMs}`);
  } finally {
    await client.end();
  }
  const pooler = await poolerFor(databaseUrl);
  return { DATABASE_URL: pooler.through(databaseUrl), DATABASE_DIRECT_URL: databaseUrl };
}
