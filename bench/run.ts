/**
 * What the measurements of one `npm run bench` run share: where its logs go, how long and how wide
 * each load is, and the small helpers every measurement uses (printing, HTTP JSON calls, medians).
 */
import path from 'node:path';

export interface BenchRun {
  /** Logs of every process of the run (kept), and their data folders (removed at the end). */
  outDir: string;
  /** Seconds per scenario. */
  seconds: number;
  /** Concurrent connections per scenario. */
  connections: number;
}

/** The log file of the run's process `name`. */
export const logFile = (run: BenchRun, name: string): string => path.join(run.outDir, `${name}.log`);

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
export const round = (n: number, d = 2): number => Math.round(n * 10 ** d) / 10 ** d;

export function say(text: string): void {
  process.stdout.write(text + '\n');
}

/** A JSON request to the service; throws unless it answers 2xx. */
export async function json<T>(url: string, method: string, body: unknown, token?: string): Promise<T> {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${url}: ${response.status} ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Round-robin over a list. */
export function cycle<T>(items: T[]): () => T {
  let i = 0;
  return () => items[i++ % items.length]!;
}
