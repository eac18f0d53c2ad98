/**
 * The service as its own process (`server/src/main.ts` under tsx, or another command that runs it),
 * as an operator runs it: for the tests of what happens to the process itself (signals, exit
 * codes). Its JSON log lines are parsed and kept; standard error is kept for failure messages.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';

export interface LogEntry {
  msg?: string;
  [key: string]: unknown;
}

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  log: LogEntry[];
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  stderr(): string;
  /** Resolves with the first log entry `match` accepts, or rejects after `timeoutMs`. */
  waitForLog(match: (entry: LogEntry) => boolean, timeoutMs?: number): Promise<LogEntry>;
}

export const repositoryRoot = path.resolve('.');

/**
 * The environment of the service on its embedded database in `dataDir` (DATABASE_URL left out), on
 * 127.0.0.1 and a free port, logging JSON at info, with rate limits off and cheap bcrypt unless
 * `overrides` say otherwise.
 */
export function embeddedServiceEnv(dataDir: string, overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { DATABASE_URL: _embedded, ...inherited } = process.env;
  return {
    ...inherited,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    AUTH_RATE_LIMIT: '0',
    API_RATE_LIMIT: '0',
    BCRYPT_ROUNDS: '4',
    ...overrides,
  };
}

/** What starts the service: a program, its arguments and the folder it runs in. */
export interface ServiceCommand {
  file: string;
  args: string[];
  cwd: string;
  /**
   * In a process group of its own: for a launcher (npx) that runs the service as a grandchild and
   * does not pass signals on, the group is signalled, as a terminal's Ctrl-C does.
   */
  detached?: boolean;
}

/** The service from its sources, under tsx. */
const FROM_SOURCES: ServiceCommand = { file: process.execPath, args: ['--import', 'tsx', 'server/src/main.ts'], cwd: repositoryRoot };

/** Starts the service with `env` (the whole environment it gets) and resolves once it listens. */
export async function startServiceProcess(
  env: NodeJS.ProcessEnv,
  startTimeoutMs = 90_000,
  command: ServiceCommand = FROM_SOURCES,
): Promise<ServiceProcess> {
  const child = spawn(command.file, command.args, {
    cwd: command.cwd,
    env,
    detached: command.detached ?? false,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: LogEntry[] = [];
  const listeners = new Set<(entry: LogEntry) => void>();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  // Both pipes are read: a full pipe would block the service.
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  createInterface({ input: child.stdout }).on('line', (line) => {
    let entry: LogEntry;
    try {
      entry = JSON.parse(line) as LogEntry;
    } catch {
      return;
    }
    log.push(entry);
    for (const listener of listeners) listener(entry);
  });
  const waitForLog = (match: (entry: LogEntry) => boolean, timeoutMs = 30_000) =>
    new Promise<LogEntry>((resolve, reject) => {
      const found = log.find(match);
      if (found) return resolve(found);
      const timer = setTimeout(() => {
        listeners.delete(listener);
        reject(new Error(`no such log line within ${timeoutMs} ms; stderr: ${stderr}`));
      }, timeoutMs);
      const listener = (entry: LogEntry) => {
        if (!match(entry)) return;
        clearTimeout(timer);
        listeners.delete(listener);
        resolve(entry);
      };
      listeners.add(listener);
    });
  const started = waitForLog((entry) => entry.msg === 'listening', startTimeoutMs);
  const url = await Promise.race([
    started.then((entry) => entry.url as string),
    exited.then((code) => Promise.reject(new Error(`the service exited with ${code} before listening; stderr: ${stderr}`))),
  ]);
  return { url, child, log, exited, stderr: () => stderr, waitForLog };
}

/** A fresh invite code through the operator command, as an operator mints one (`npm run invite`). */
export function operatorInviteCode(env: NodeJS.ProcessEnv, uses = 10): Promise<string> {
  return new Promise((resolve, reject) => {
    const args = ['--import', 'tsx', 'server/src/cli.ts', 'invite', 'create', '--uses', String(uses)];
    execFile(process.execPath, args, { cwd: repositoryRoot, env, timeout: 90_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stderr}`));
      else resolve(stdout.trim().split('\n').pop()!.trim());
    });
  });
}

/** `npm run user -- …` in the repository, as an operator types it: its exit code and output. */
export function npmRunUser(env: NodeJS.ProcessEnv, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'user', '--', ...args], { cwd: repositoryRoot, env, timeout: 90_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}
