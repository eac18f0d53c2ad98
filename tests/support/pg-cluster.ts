/**
 * A throw-away PostgreSQL cluster of the machine's own binaries (initdb into a temporary folder, on
 * a free port), which a test may stop and start at will. initdb refuses to run as root: then every
 * command runs as the `postgres` user (runuser), in a folder handed over to it.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export interface PgCluster {
  /** postgres://postgres@127.0.0.1:PORT/DATABASE */
  url(database?: string): string;
  port: number;
  stop(mode?: 'fast' | 'immediate' | 'smart'): Promise<void>;
  start(): Promise<void>;
  /**
   * SIGSTOP to the postmaster and every process it started: the server hangs instead of refusing
   * (connections are still accepted by the kernel, nothing answers). `thaw` sends SIGCONT.
   */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  /** psql as the superuser, one statement. */
  psql(sql: string, database?: string): Promise<string>;
  destroy(): Promise<void>;
}

function run(file: string, args: string[], options: { asUser?: string; timeoutMs?: number } = {}): Promise<string> {
  const [command, argv] = options.asUser ? ['runuser', ['-u', options.asUser, '--', file, ...args]] : [file, args];
  return new Promise((resolve, reject) => {
    execFile(command, argv, { timeout: options.timeoutMs ?? 60_000, cwd: os.tmpdir() }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${path.basename(file)} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The folder of the newest PostgreSQL binaries installed, or undefined with the reason. */
export function findPostgresBinaries(): { bin?: string; reason?: string } {
  const base = '/usr/lib/postgresql';
  const bin = process.env.PG_BIN;
  if (bin) return existsSync(path.join(bin, 'initdb')) ? { bin } : { reason: `no initdb in PG_BIN=${bin}` };
  if (!existsSync(base)) return { reason: `${base} does not exist (no PostgreSQL server binaries installed)` };
  const versions = readdirSync(base)
    .filter((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) return { reason: `no initdb under ${base}/*/bin` };
  return { bin: path.join(base, versions[0]!, 'bin') };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A fresh, empty database on the PostgreSQL server of `adminUrl` (whose own database is never written), and how to drop it. */
export async function freshDatabase(adminUrl: string, prefix: string): Promise<{ name: string; url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

/** Signals the postmaster first (so that it starts nothing new), then its children. */
async function signalAll(data: string, signal: 'SIGSTOP' | 'SIGCONT'): Promise<void> {
  const postmaster = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(postmaster, signal);
  // pgrep exits 1 when there is no child.
  const children = await run('pgrep', ['-P', String(postmaster)]).catch(() => '');
  for (const pid of children.split('\n').filter(Boolean)) {
    try {
      process.kill(Number(pid), signal);
    } catch (error) {
      // A backend that ended meanwhile.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
}

export async function createCluster(bin: string): Promise<PgCluster> {
  const root = process.getuid?.() === 0;
  let asUser: string | undefined;
  if (root) {
    try {
      await run('id', ['-u', 'postgres']);
    } catch {
      throw new Error('running as root and there is no postgres user for initdb to run as');
    }
    asUser = 'postgres';
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-pg-'));
  if (asUser) {
    const uid = Number((await run('id', ['-u', asUser])).trim());
    const gid = Number((await run('id', ['-g', asUser])).trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  const port = await freePort();
  const tool = (name: string, args: string[], timeoutMs?: number) =>
    run(path.join(bin, name), args, { ...(asUser ? { asUser } : {}), ...(timeoutMs ? { timeoutMs } : {}) });
  try {
    await tool('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'], 120_000);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=50 -c shared_buffers=16MB`;
  const cluster: PgCluster = {
    port,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    start: async () => {
      await tool('pg_ctl', ['start', '-D', data, '-w', '-t', '60', '-l', path.join(dir, 'server.log'), '-o', options], 90_000);
    },
    stop: async (mode = 'fast') => {
      await tool('pg_ctl', ['stop', '-D', data, '-w', '-t', '60', '-m', mode], 90_000);
    },
    freeze: () => signalAll(data, 'SIGSTOP'),
    thaw: () => signalAll(data, 'SIGCONT'),
    psql: (sql, database = 'postgres') =>
      tool('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', database, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql]),
    destroy: async () => {
      // A frozen cluster (a test that failed half-way) would not even stop.
      await signalAll(data, 'SIGCONT').catch(() => {});
      await tool('pg_ctl', ['stop', '-D', data, '-w', '-m', 'immediate']).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await cluster.start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return cluster;
}
