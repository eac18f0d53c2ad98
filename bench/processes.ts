/** Child processes the bench drives: the service (as users run it) and the baselines, each on a free loopback port. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { openSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../tests/support/pg-cluster.js';
import type { FixedCost } from './fixed-cost.js';
import { say } from './run.js';

export const root = path.resolve(import.meta.dirname, '..');
/** Where the service is started from: this checkout, or another (`--service-root`, e.g. a copy before a change). */
let serviceRoot = root;
export function setServiceRoot(dir: string): void {
  serviceRoot = path.resolve(dir);
}
/** The checkout the service is started (and built) from. */
export const serviceRootDir = (): string => serviceRoot;

export interface Child {
  name: string;
  url: string;
  pid: number;
  process: ChildProcess;
  /** Milliseconds from spawn to the first answer. */
  startMs: number;
  stop(): Promise<void>;
}

async function waitForAnswer(url: string, child: ChildProcess, logFile: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  for (;;) {
    if (exited)
      throw new Error(`${url}: the process exited before answering; see ${logFile}:\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
    try {
      const response = await fetch(url);
      await response.arrayBuffer();
      return;
    } catch {
      if (performance.now() > deadline) throw new Error(`${url}: no answer within ${timeoutMs} ms; see ${logFile}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

/**
 * Spawns `node [nodeArgs] <args>` with stdout and stderr to `logFile` (the service logs a line per
 * request: the bench never parses them), and resolves once `probePath` answers.
 */
export async function startChild(options: {
  name: string;
  nodeArgs?: string[];
  args: string[];
  env?: Record<string, string>;
  port: number;
  probePath: string;
  logFile: string;
  timeoutMs?: number;
  cwd?: string;
}): Promise<Child> {
  const out = openSync(options.logFile, 'a');
  const started = performance.now();
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...options.args], {
    cwd: options.cwd ?? root,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', out, out],
  });
  const url = `http://127.0.0.1:${options.port}`;
  try {
    await waitForAnswer(url + options.probePath, child, options.logFile, options.timeoutMs ?? 60_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const startMs = performance.now() - started;
  let stopped: Promise<void> | undefined;
  return {
    name: options.name,
    url,
    pid: child.pid!,
    process: child,
    startMs,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGTERM');
      })),
  };
}

/** `npm run build` (tsc → dist/) in the service's checkout, as `npm start` does first; returns its duration in ms. */
export function buildService(): number {
  const started = performance.now();
  execFileSync(process.execPath, [path.join(serviceRoot, 'node_modules/typescript/bin/tsc'), '-b', 'tsconfig.build.json'], {
    cwd: serviceRoot,
    stdio: 'inherit',
  });
  return performance.now() - started;
}

/** The node options of `npm start` (package.json `scripts.start`), so the bench runs exactly what users run. */
function startOptions(): string[] {
  const start = (JSON.parse(readFileSync(path.join(serviceRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  return start.split(/\s+/).filter((token) => token.startsWith('--'));
}

/** What the bench starts, for the report. */
export const serviceCommand = (): string => ['node', ...startOptions(), 'dist/server/src/main.js'].join(' ');

/** The service as `npm start` runs it after the build: `node <its options> dist/server/src/main.js`; `extraNodeArgs` come after, so they win. */
export async function startService(
  name: string,
  env: Record<string, string>,
  logFile: string,
  extraNodeArgs: string[] = [],
): Promise<Child> {
  const port = await freePort();
  return startChild({
    name,
    nodeArgs: [...startOptions(), ...extraNodeArgs],
    args: ['dist/server/src/main.js'],
    env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
    port,
    probePath: '/v1',
    logFile,
    cwd: serviceRoot,
  });
}

export async function startBaseline(mode: 'bare' | 'headers' | 'hooks' | 'pg', databaseUrl: string, logFile: string): Promise<Child> {
  const port = await freePort();
  return startChild({
    name: `baseline-${mode}`,
    nodeArgs: ['--import', 'tsx'],
    args: ['bench/baseline-server.ts', mode, databaseUrl],
    env: { BENCH_PORT: String(port) },
    port,
    probePath: mode === 'pg' ? '/v1/projects/none' : '/v1',
    logFile,
  });
}

/** Resident set size of a process, in MiB (Linux). */
export function rssMiB(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    return kb ? Number(kb) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Samples a process's RSS every `everyMs` until stopped; answers the peak. */
export function sampleRss(pid: number, everyMs = 100): { stop(): number } {
  let peak = rssMiB(pid) ?? 0;
  const timer = setInterval(() => {
    const now = rssMiB(pid);
    if (now !== undefined && now > peak) peak = now;
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return Math.round(peak);
    },
  };
}

const CLOCK_TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system, every thread) of each process, in µs, from /proc (Linux); gone processes are left out. */
export function cpuMicros(pids: number[]): Map<number, number> {
  const times = new Map<number, number>();
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      // utime and stime (fields 14 and 15) count every thread of the process.
      times.set(pid, ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS_PER_SECOND);
    } catch {
      // exited
    }
  }
  return times;
}

/** CPU µs spent between two `cpuMicros` samples, over the processes present in both. */
export function cpuSpent(before: Map<number, number>, after: Map<number, number>): number {
  let spent = 0;
  for (const [pid, t] of after) if (before.has(pid)) spent += t - before.get(pid)!;
  return spent;
}

/** Every PostgreSQL process on this machine (server and backends), by process name. */
export function postgresPids(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * GET /v1's CPU per request in-process (bench/fixed-cost.ts, in a process of its own), in the
 * service's build against a bare Koa app: the pipeline's fixed cost without the network's.
 */
export function fixedCost(): FixedCost {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'bench/fixed-cost.ts', '--json', '--root', serviceRootDir()], {
    cwd: root,
    encoding: 'utf8',
  });
  const result = JSON.parse(out.trim().split('\n').at(-1)!) as FixedCost;
  const micros = result.service[0]!.micros;
  say(
    `Fixed cost of GET /v1 in-process: service ${micros} µs of CPU per request, bare Koa ${result.bareMicros} µs (×${(micros / result.bareMicros).toFixed(2)})`,
  );
  return result;
}
