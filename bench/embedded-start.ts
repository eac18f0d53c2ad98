/**
 * `npm run bench:start` (`npx tsx bench/embedded-start.ts`): how long the service takes to start on
 * the embedded database, where that time goes, and how much memory it holds at rest and under load.
 *
 * - **`npm start`'s build** (`npm run build`: `tsc -b` and the console's Vite build) once from
 *   nothing, as in a new clone (dist/ removed), then `--runs` times with nothing changed (`tsc -b`
 *   finds the output up to date).
 * - **First start**: a new data folder each time, so PGlite makes its database and every migration
 *   is applied; `--runs` times.
 * - **Later start**: the last of those folders again; `--runs` times.
 *
 * Each start is timed from spawn to the first answer to `GET /v1`, the service as `npm start` runs
 * it once built (bench/processes.ts), and split by the service's own log lines: `ready` (from the
 * first line of run.ts) leaves before it node's start and the loading of modules; `database ready`
 * and `migrations applied` give the database's part; what remains of `ready` is the contract, the
 * services and the listening socket.
 *
 * Memory is the process's resident set (VmRSS): at the first answer of the last later start, at rest
 * 5 s on, its peak while 10 connections publish events for `--seconds` seconds with one API token
 * (rate limits off: the load is the point), and at rest 10 s after the load. Medians; the machine
 * and its load average are printed with them, and written into bench/start-results.md between its
 * markers.
 *
 * Options: --runs N (default 5); --seconds N (default 20); --no-write.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadAverage, writeGeneratedBlock } from './bulk.js';
import { load, probe } from './load.js';
import { root, rssMiB, sampleRss, serviceCommand, startService, type Child } from './processes.js';
import { json, median, round, say, sleep } from './run.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '20' },
    'no-write': { type: 'boolean', default: false },
  },
});
const runs = Number(args.runs);
const seconds = Number(args.seconds);

interface Start {
  /** Spawn to the first answer. */
  total: number;
  /** Node's start and the loading of modules: spawn to run.ts's first line. */
  loading: number;
  /** Opening the embedded database, its migrations included. */
  database: number;
  migrations: number;
  /** The contract, the services and the listening socket. */
  rest: number;
}

/** The `ms` of the last log line with message `msg`; 0 when there is none (no migration to apply). */
function loggedMs(logFile: string, msg: string): number {
  const line = readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .at(-1);
  return line ? (JSON.parse(line) as { ms: number }).ms : 0;
}

const outDir = mkdtempSync(path.join(os.tmpdir(), 'sb-bench-start-'));
const env = { LOG_LEVEL: 'info', API_RATE_LIMIT: '0', AUTH_RATE_LIMIT: '0', HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

async function start(name: string, dataDir: string): Promise<{ child: Child; start: Start; logFile: string }> {
  const logFile = path.join(outDir, `${name}.log`);
  const child = await startService(name, { ...env, DATA_DIR: dataDir }, logFile);
  const ready = loggedMs(logFile, 'ready');
  const database = loggedMs(logFile, 'database ready');
  return {
    child,
    logFile,
    start: {
      total: child.startMs,
      loading: child.startMs - ready,
      database,
      migrations: loggedMs(logFile, 'migrations applied'),
      rest: ready - database,
    },
  };
}

const summary = (starts: Start[]): Record<keyof Start, number> => {
  const of = (key: keyof Start) => round(median(starts.map((s) => s[key])), 0);
  return { total: of('total'), loading: of('loading'), database: of('database'), migrations: of('migrations'), rest: of('rest') };
};

/** An account, a project and an API token that may publish, on the service that logged its first-run link. */
async function publisher(url: string, logFile: string): Promise<string> {
  const invite = /signup\?invite=(inv_[a-z2-7]+)/.exec(readFileSync(logFile, 'utf8'))?.[1];
  if (!invite) throw new Error(`no first-run invite in ${logFile}`);
  const password = 'correct horse battery';
  const signup = await json<{ data: { token: string } }>(`${url}/v1/auth/signup`, 'POST', {
    username: 'bench',
    email: 'bench@example.com',
    password,
    invite,
  });
  const session = signup.data.token;
  await json(`${url}/v1/projects`, 'POST', { name: 'Bench', namespace: 'bench' }, session);
  const token = await json<{ data: { token: string } }>(
    `${url}/v1/auth/tokens`,
    'POST',
    { name: 'bench', projects: ['bench'], scopes: ['events:write'] },
    session,
  );
  return token.data.token;
}

say(`Embedded start-up: ${runs} runs each; ${os.cpus().length} cores; load ${loadAverage().join(' ')}`);
/** `npm run build`, timed; `fresh` first removes the compiled service, as in a new clone. */
const build = (fresh: boolean): number => {
  if (fresh) rmSync(path.join(root, 'dist'), { recursive: true, force: true });
  const started = performance.now();
  execFileSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'ignore' });
  return performance.now() - started;
};
const fullBuild = build(true);
const builds = Array.from({ length: runs }, () => build(false));
say(`npm run build: ${round(fullBuild, 0)} ms from nothing, median ${round(median(builds), 0)} ms with nothing changed`);

const first: Start[] = [];
let dataDir = '';
for (let i = 0; i < runs; i++) {
  dataDir = path.join(outDir, `data-${i}`);
  const { child, start: s } = await start(`first-${i}`, dataDir);
  await child.stop();
  first.push(s);
}
const later: Start[] = [];
let last: Awaited<ReturnType<typeof start>> | undefined;
for (let i = 0; i < runs; i++) {
  if (last) await last.child.stop();
  last = await start(`later-${i}`, dataDir);
  later.push(last.start);
}
const { child, logFile } = last!;
const memory = { atFirstAnswer: round(rssMiB(child.pid) ?? NaN, 0), atRest: 0, underLoad: 0, afterLoad: 0 };
await sleep(5_000);
memory.atRest = round(rssMiB(child.pid) ?? NaN, 0);
const token = await publisher(child.url, logFile);
const request = {
  method: 'POST' as const,
  path: '/v1/projects/bench/feeds/general/events',
  headers: { authorization: `Bearer ${token}` },
  body: JSON.stringify({ event: 'New sign-up', emoji: '🎉', tags: { plan: 'pro' } }),
};
await probe(child.url, request, 201);
const peak = sampleRss(child.pid);
const publishing = await load(child.url, { connections: 10, seconds, next: () => request });
memory.underLoad = peak.stop();
await sleep(10_000);
memory.afterLoad = round(rssMiB(child.pid) ?? NaN, 0);
await child.stop();
rmSync(outDir, { recursive: true, force: true });

const firstSummary = summary(first);
const laterSummary = summary(later);
const describe = (s: Record<keyof Start, number>) =>
  `${s.total} ms to the first answer: node and modules ${s.loading} ms, the database ${s.database} ms ` +
  `(migrations ${s.migrations} ms), contract, services and socket ${s.rest} ms`;
const lines = [
  `Measured by \`npm run bench:start\` on ${os.cpus().length} cores, load average ${loadAverage().join(' ')} after the run; ` +
    `\`${serviceCommand()}\`, medians of ${runs} runs.`,
  '',
  `- \`npm run build\` (what \`npm start\` does first): ${round(fullBuild, 0)} ms in a new clone, ${round(median(builds), 0)} ms when nothing changed`,
  `- First start (new data folder: the database made, every migration applied): ${describe(firstSummary)}`,
  `- Later start (the same folder): ${describe(laterSummary)}`,
  `- Resident memory: ${memory.atFirstAnswer} MiB at the first answer, ${memory.atRest} MiB at rest, ` +
    `${memory.underLoad} MiB at most while publishing ${publishing.rps} events/s (10 connections, ${seconds} s, ` +
    `p99 ${publishing.p99} ms, ${publishing.non2xx} not 2xx), ${memory.afterLoad} MiB at rest 10 s after`,
];
for (const line of lines) say(line);
const seconds1 = (ms: number) => (ms / 1000).toFixed(1);
/** The README's sentence on how long `npm start` takes, from this run. */
const readme =
  `On a 2-core machine (\`npm run bench:start\`, [bench/start-results.md](bench/start-results.md)), the first \`npm start\` ` +
  `of a clone serves after about ${seconds1(fullBuild + firstSummary.total)} s (${seconds1(fullBuild)} s of compiling, ` +
  `${seconds1(firstSummary.database)} s making the embedded database), later ones after about ` +
  `${seconds1(median(builds) + laterSummary.total)} s; it then holds about ${memory.atRest} MiB of memory, ` +
  `${memory.underLoad} MiB at most under a publishing load.`;
if (!args['no-write']) {
  writeGeneratedBlock(
    path.join(root, 'README.md'),
    { start: '<!-- bench:start readme -->', end: '<!-- /bench:start readme -->' },
    readme,
    '',
  );
  writeGeneratedBlock(
    path.join(root, 'bench/start-results.md'),
    { start: '<!-- bench:start results -->', end: '<!-- /bench:start results -->' },
    lines.join('\n'),
    '# Start-up and memory on the embedded database\n\nWhat `npm run bench:start` measured (bench/embedded-start.ts says how).',
  );
}
