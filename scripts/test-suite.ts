/**
 * The suite, in shards run side by side: `npm run test:suite -- [files…] [--shards N] [--ignore FILE]… [mocha options…]`.
 *
 * Each shard is a mocha process of its own with the root hooks' own server on its own database (a
 * fresh PostgreSQL database with DATABASE_URL, a fresh embedded folder without), so shards share
 * nothing but the machine. Most of the suite waits (on timers, on other processes, on a browser),
 * so two shards on two cores take a little over half the time of one.
 *
 * Files go to shards longest first, each to the shard with the least work so far, by the seconds in
 * tests/support/test-durations.json (a file it does not list counts as that file's median). Those
 * figures are written by `--record-durations`; stale ones only balance the shards worse.
 *
 * Options: `--shards N` (default TEST_SHARDS, else 2; 1 runs one process); `--ignore FILE` leaves that
 * file out; files given run instead of all of tests/; every other argument goes to each mocha.
 * Each line of a shard's output is prefixed with the shard's number, and a line says when each
 * shard ended (`shard K of N ended after S s`); the exit status is non-zero when any shard failed.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const durationsFile = path.join(root, 'tests/support/test-durations.json');
const reporter = path.join(root, 'tests/support/timed-spec-reporter.cjs');

interface Invocation {
  files: string[];
  shards: number;
  record: boolean;
  mochaArgs: string[];
}

function parse(args: string[]): Invocation {
  const given: string[] = [];
  const ignored = new Set<string>();
  const mochaArgs: string[] = [];
  let shards = Number(process.env.TEST_SHARDS ?? 2);
  let record = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const value = () => {
      const next = args[++i];
      if (next === undefined) throw new Error(`${arg} takes a value`);
      return next;
    };
    if (arg === '--shards') shards = Number(value());
    else if (arg === '--ignore') ignored.add(path.normalize(value()));
    else if (arg === '--record-durations') record = true;
    else if (arg.endsWith('.test.ts') && !arg.startsWith('-')) given.push(path.normalize(arg));
    else mochaArgs.push(arg);
  }
  if (!Number.isInteger(shards) || shards < 1) throw new Error(`--shards takes a whole number of at least 1, not ${shards}`);
  const all = given.length > 0 ? given : allTestFiles();
  return { files: all.filter((file) => !ignored.has(file)), shards, record, mochaArgs };
}

function allTestFiles(): string[] {
  return readdirSync(path.join(root, 'tests'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => path.join('tests', file))
    .sort();
}

function readDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(durationsFile, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/** Longest first, each file to the shard with the fewest seconds so far. */
function balance(files: string[], shards: number, durations: Record<string, number>): string[][] {
  const known = files.map((file) => durations[file]).filter((s): s is number => s !== undefined);
  const median = known.sort((a, b) => a - b)[Math.floor(known.length / 2)] ?? 1;
  const weight = (file: string): number => durations[file] ?? median;
  const buckets = Array.from({ length: Math.min(shards, files.length) }, () => ({ files: [] as string[], seconds: 0 }));
  for (const file of [...files].sort((a, b) => weight(b) - weight(a))) {
    const lightest = buckets.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    lightest.files.push(file);
    lightest.seconds += weight(file);
  }
  return buckets.map((bucket) => bucket.files.sort());
}

/** Runs one shard's mocha, its output prefixed; resolves to its exit status. */
function runShard(index: number, count: number, files: string[], mochaArgs: string[], durationsOut: string): Promise<number> {
  const prefix = count > 1 ? `[${index + 1}/${count}] ` : '';
  const child = spawn(path.join(root, 'node_modules/.bin/mocha'), ['--reporter', reporter, ...mochaArgs, ...files], {
    cwd: root,
    env: { ...process.env, TEST_DURATIONS_OUT: durationsOut },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    createInterface({ input: stream }).on('line', (line) => out.write(`${prefix}${line}\n`));
  }
  return new Promise((resolve) => child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

const invocation = parse(process.argv.slice(2));
const shards = balance(invocation.files, invocation.shards, readDurations());
const outputs = mkdtempSync(path.join(os.tmpdir(), 'signalboard-durations-'));
console.log(
  `${invocation.files.length} test files in ${shards.length} shard(s) of ${shards.map((files) => files.length).join(', ')} files`,
);
const started = performance.now();
// Each shard says when it ends, so that a caller (CI) can start other work as soon as one does.
const statuses = await Promise.all(
  shards.map(async (files, i) => {
    const status = await runShard(i, shards.length, files, invocation.mochaArgs, path.join(outputs, `${i}.json`));
    console.log(
      `shard ${i + 1} of ${shards.length} ended after ${Math.round((performance.now() - started) / 1000)} s (exit status ${status})`,
    );
    return status;
  }),
);
if (invocation.record) {
  const measured: Record<string, number> = { ...readDurations() };
  for (let i = 0; i < shards.length; i++) {
    try {
      Object.assign(measured, JSON.parse(readFileSync(path.join(outputs, `${i}.json`), 'utf8')) as Record<string, number>);
    } catch {
      // A shard that ended before mocha's end of run wrote no figures: its files keep their old ones.
    }
  }
  const rounded = Object.fromEntries(
    Object.entries(measured)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([f, s]) => [f, Math.round(s * 10) / 10]),
  );
  writeFileSync(durationsFile, `${JSON.stringify(rounded, null, 2)}\n`);
}
rmSync(outputs, { recursive: true, force: true });
process.exitCode = statuses.some((status) => status !== 0) ? 1 : 0;
