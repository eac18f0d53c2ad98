/**
 * A throw-away PostgreSQL cluster of the machine's own binaries (initdb into a temporary folder, on
 * a free port), which a test may stop and start at will. initdb refuses to run as root: then every
 * command runs as the `postgres` user (runuser), in a folder handed over to it.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface PgCluster {
  /** postgres://postgres@127.0.0.1:PORT/DATABASE */
  url(database?: string): string;
  port: number;
  stop(mode?: 'fast' | 'immediate' | 'smart'): Promise<void>;
  start(): Promise<void>;
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
  if (process.env.PG_BIN) return existsSync(path.join(process.env.PG_BIN, 'initdb')) ? { bin: process.env.PG_BIN } : { reason: `no initdb in PG_BIN=${process.env.PG_BIN}` };
  if (!existsSync(base)) return { reason: `${base} does not exist (no PostgreSQL server binaries installed)` };
  const versions = readdirSync(base).filter((v) => existsSync(path.join(base, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
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
  const tool = (name: string, args: string[], timeoutMs?: number) => run(path.join(bin, name), args, { ...(asUser ? { asUser } : {}), ...(timeoutMs ? { timeoutMs } : {}) });
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
    psql: (sql, database = 'postgres') => tool('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', database, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql]),
    destroy: async () => {
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
