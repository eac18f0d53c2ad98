/**
 * `npm run bench`: the service against its own ceiling, on PostgreSQL.
 *
 * Creates a fresh database `sb_bench_<ts>` on the server DATABASE_URL names (default
 * postgres://postgres@127.0.0.1:5432/postgres, used as the admin URL only), starts the service as
 * users run it (`npm run build`, then node with `npm start`'s options, migrations on start), seeds it with direct
 * SQL, opens sessions through the real login route, and drives it with autocannon. In the same run,
 * two baselines on the same port layout: a bare Koa JSON route and a hand-written Koa + pg project
 * read. Prints every figure, writes bench/results.json and the table in BENCHMARKS.md, and drops the
 * database at the end.
 *
 * This file is the run and its load scenarios; the measurements beside them are in bench/, one
 * file each (interleaved.ts: GET /v1, the project read and increments against their baselines; stream-latency.ts, signup-burst.ts, routing.ts, fixed-cost.ts,
 * cold-start.ts), with what they share in bench/run.ts and the processes in bench/processes.ts.
 *
 * Options:
 *   --duration S     seconds per scenario (default 10); --warmup S (default 2); --connections N (default 50)
 *   --section NAME   which table of BENCHMARKS.md to write (default `current`; `before` for a run before changes)
 *   --only a,b       run only these scenarios and measurements (e.g. baseline-bare,root,fixed-cost); implies --no-write
 *   --profile        run instance A with `--cpu-prof` (profiles in the run's temporary folder, printed)
 *   --node-args "…"  extra node options for instance A only, e.g. "--max-old-space-size=256" (a V8
 *                    setting a deployment might use); an experiment: implies --no-write
 *   --no-write       print only
 *   --keep-db        do not drop the database
 *   --render         rewrite BENCHMARKS.md's tables from bench/results*.json, without running anything
 *   --service-root D start the service from another checkout D (e.g. a copy before a change); the
 *                    baselines, the seed and the in-process routing figures stay this checkout's
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { coldStart } from '../bench/cold-start.js';
import { interleaved } from '../bench/interleaved.js';
import { load, probe, type LoadRequest, type LoadResult } from '../bench/load.js';
import {
  buildService,
  fixedCost,
  root,
  rssMiB,
  sampleRss,
  setServiceRoot,
  startBaseline,
  startService,
  type Child,
} from '../bench/processes.js';
import { writeResults, type Results, type ScenarioResult } from '../bench/report.js';
import { measureRouting } from '../bench/routing.js';
import { cycle, json, logFile, round, say, type BenchRun } from '../bench/run.js';
import { seed } from '../bench/seed.js';
import { signupBurst } from '../bench/signup-burst.js';
import { streamLatency } from '../bench/stream-latency.js';
import { freshDatabase } from '../tests/support/pg-cluster.js';

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '50' },
    section: { type: 'string', default: 'current' },
    only: { type: 'string' },
    profile: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    'node-args': { type: 'string' },
    'keep-db': { type: 'boolean', default: false },
    'service-root': { type: 'string' },
    render: { type: 'boolean', default: false },
  },
});
if (args['service-root']) setServiceRoot(args['service-root']);
const seconds = Number(args.duration);
const warmup = Number(args.warmup);
const connections = Number(args.connections);
const only = args.only ? new Set(args.only.split(',')) : undefined;
const wanted = (name: string) => !only || only.has(name);
const write = !args['no-write'] && !only && !args['node-args'];

const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
/** Logs of every process of the run (kept), and their data folders (removed at the end). */
const outDir = path.join(os.tmpdir(), `signalboard-bench-${Date.now()}`);
const measurement: BenchRun = { outDir, seconds, connections };
const log = (name: string) => logFile(measurement, name);

async function postgresVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ server_version: string }>('show server_version');
  await client.end();
  return rows[0]!.server_version.split(' ')[0]!;
}

async function main(): Promise<void> {
  mkdirSync(outDir, { recursive: true });
  const cpus = os.cpus();
  const results: Results = {
    when: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    section: args.section,
    options: { seconds, warmup, connections },
    machine: {
      cpu: cpus[0]?.model.trim() ?? 'unknown',
      cores: cpus.length,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      postgres: await postgresVersion(adminUrl),
      os: `${os.type()} ${os.release()}`,
      loadBefore: os.loadavg(),
    },
    seed: { counts: {}, ms: 0 },
    scenarios: [],
  };
  say(
    `Machine: ${results.machine.cpu}, ${results.machine.cores} cores, ${results.machine.memoryGiB} GiB; Node ${results.machine.node}; PostgreSQL ${results.machine.postgres}`,
  );
  say(
    `Load average: ${results.machine.loadBefore.map((n) => n.toFixed(2)).join(' ')}${results.machine.loadBefore[0]! > results.machine.cores / 2 ? '  (the machine is busy: compare ratios, not absolute figures)' : ''}`,
  );
  say(`Logs: ${outDir}`);

  const db = await freshDatabase(adminUrl, 'sb_bench');
  say(`Database: ${db.name}`);
  const children: Child[] = [];
  try {
    const env = {
      DATABASE_URL: db.url,
      LOG_LEVEL: 'info',
      // The bench measures the request path, not the limiter: limits are off (the service's own
      // tests cover them). A run with them on is the `project-read-limited` scenario.
      AUTH_RATE_LIMIT: '0',
      API_RATE_LIMIT: '0',
      // The insight-create scenario adds thousands to one project: its cap is lifted for the run.
      MAX_INSIGHTS_PER_PROJECT: '100000',
      BCRYPT_ROUNDS: '10',
      DATA_DIR: path.join(outDir, 'data'),
    };
    const profileArgs = args.profile ? [`--cpu-prof`, `--cpu-prof-dir=${path.join(outDir, 'profiles')}`] : [];
    const nodeArgs = args['node-args']?.split(/\s+/).filter(Boolean) ?? [];
    if (nodeArgs.length > 0) say(`Instance A runs with: node ${nodeArgs.join(' ')}`);
    if (args.profile)
      say(
        `CPU profiles of instance A: ${path.join(outDir, 'profiles')} (summarise with: npx tsx bench/profile-summary.ts <file> 40 --last <seconds>)`,
      );
    say(`Built the service (npm run build) in ${(buildService() / 1000).toFixed(1)} s`);
    const a = await startService('A', env, log('service-a'), [...nodeArgs, ...profileArgs]);
    children.push(a);
    say(`Instance A at ${a.url} (started in ${a.startMs.toFixed(0)} ms, migrations included)`);

    const fixture = await seed(db.url);
    results.seed = { counts: fixture.counts, ms: fixture.ms };
    say(`Seeded in ${(fixture.ms / 1000).toFixed(1)} s: ${JSON.stringify(fixture.counts)}`);

    // Sessions through the real login route, for every caller the scenarios need.
    const tokens = new Map<number, string>();
    const login = async (userIndex: number) => {
      if (!tokens.has(userIndex)) {
        const answer = await json<{ data: { token: string } }>(`${a.url}/v1/auth/login`, 'POST', {
          login: fixture.users[userIndex]!.username,
          password: fixture.password,
        });
        tokens.set(userIndex, answer.data.token);
      }
      return tokens.get(userIndex)!;
    };
    const renamed = fixture.projects.slice(0, connections);
    const needed = new Set([
      ...fixture.largest.members,
      ...renamed.map((p) => p.members[0]!),
      fixture.smallLog.members[0]!,
      fixture.hugeLog.members[0]!,
      fixture.stream.members[0]!,
      ...fixture.projects[1]!.members,
    ]);
    const loginStarted = performance.now();
    for (const u of needed) await login(u);
    say(`Logged in ${needed.size} callers in ${((performance.now() - loginStarted) / 1000).toFixed(1)} s`);
    const memberTokens = await Promise.all(fixture.largest.members.map(login));
    const idleRss = Math.round(rssMiB(a.pid) ?? 0);

    const bare = await startBaseline('bare', db.url, log('baseline-bare'));
    children.push(bare);
    const withHeaders = await startBaseline('headers', db.url, log('baseline-headers'));
    children.push(withHeaders);
    const withHooks = await startBaseline('hooks', db.url, log('baseline-hooks'));
    children.push(withHooks);
    const handWritten = await startBaseline('pg', db.url, log('baseline-pg'));
    children.push(handWritten);

    const run = async (
      name: string,
      label: string,
      target: Child,
      next: () => LoadRequest,
      extra: Partial<ScenarioResult> = {},
      expected = 200,
      clients = connections,
    ): Promise<ScenarioResult | undefined> => {
      if (!wanted(name)) return undefined;
      try {
        await probe(target.url, next(), expected);
      } catch (error) {
        // Another checkout may predate a route: its scenario is left out of that run, not the run.
        if (!args['service-root']) throw error;
        say(`${label.padEnd(58)} skipped: ${(error as Error).message.slice(0, 80)}`);
        return undefined;
      }
      if (warmup > 0) await load(target.url, { connections: clients, seconds: warmup, next });
      const rss = sampleRss(target.pid);
      const result: LoadResult = await load(target.url, { connections: clients, seconds, next });
      const scenario: ScenarioResult = { name, label, ...result, rssMiB: rss.stop(), ...extra };
      results.scenarios.push(scenario);
      say(
        `${label.padEnd(58)} ${String(result.rps).padStart(6)} req/s  p50 ${result.p50.toFixed(2).padStart(7)} ms  p99 ${result.p99.toFixed(2).padStart(7)} ms  non-2xx ${result.non2xx + result.errors}  RSS ${scenario.rssMiB} MiB`,
      );
      return scenario;
    };

    // Baselines first, then the service; ratios are computed at the end against the same run.
    const message = { method: 'GET', path: '/v1' } as const;
    const largest = fixture.largest.namespace;
    const projectRead = (() => {
      const token = cycle(memberTokens);
      return (): LoadRequest => ({ method: 'GET', path: `/v1/projects/${largest}`, headers: { authorization: `Bearer ${token()}` } });
    })();
    await run('baseline-bare', 'baseline: bare Koa GET /v1', bare, () => message);
    // The bare route with the headers the service's answer carries: how much of GET /v1's ratio is the answer itself.
    await run('baseline-headers', "baseline: bare Koa GET /v1 with the service's headers", withHeaders, () => message, {
      baseline: 'baseline-bare',
    });
    // And in a process with async-context hooks on, as the service's are (Node 20 and 22): the most
    // GET /v1 could reach with no pipeline at all.
    await run('baseline-hooks', 'baseline: the same, async-context hooks on', withHooks, () => message, {
      baseline: 'baseline-bare',
    });
    await run('baseline-pg', 'baseline: Koa + pg project read', handWritten, projectRead);
    await run('root', 'GET /v1', a, () => message, { baseline: 'baseline-bare' });
    await run('project-read', `GET /v1/projects/:namespace (20 members, 5 feeds)`, a, projectRead, { baseline: 'baseline-pg' });

    // An activity page deep in the log: walk the cursor there through the API first.
    const walk = async (namespace: string, token: string, pages: number): Promise<string> => {
      let cursor: string | undefined;
      for (let i = 0; i < pages; i++) {
        const answer = await json<{ data: { next_cursor: string | null } }>(
          `${a.url}/v1/projects/${namespace}/activity?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
          'GET',
          undefined,
          token,
        );
        cursor = answer.data.next_cursor ?? undefined;
        if (!cursor) throw new Error(`${namespace}: the log ended after ${i + 1} pages`);
      }
      return cursor!;
    };
    const activityPage = (namespace: string, tokensForIt: string[], cursor: string) => {
      const token = cycle(tokensForIt);
      return (): LoadRequest => ({
        method: 'GET',
        path: `/v1/projects/${namespace}/activity?limit=50&cursor=${cursor}`,
        headers: { authorization: `Bearer ${token()}` },
      });
    };
    if (wanted('activity-deep')) {
      const depth = 90; // pages of 100: 9,000 records in
      const cursor = await walk(largest, memberTokens[0]!, depth);
      await run(
        'activity-deep',
        `GET …/activity, page of 50 at depth ${depth * 100} of 10,000`,
        a,
        activityPage(largest, memberTokens, cursor),
        { baseline: 'baseline-pg' },
      );
    }
    if (wanted('activity-depth')) {
      const small = fixture.smallLog;
      const huge = fixture.hugeLog;
      const smallToken = await login(small.members[0]!);
      const hugeToken = await login(huge.members[0]!);
      // 90 % of the way into each log, in pages of 100.
      const smallDepth = 9;
      const hugeDepth = 900;
      const walkStarted = performance.now();
      const smallCursor = await walk(small.namespace, smallToken, smallDepth);
      const hugeCursor = await walk(huge.namespace, hugeToken, hugeDepth);
      say(`Walked ${smallDepth + hugeDepth} activity pages in ${((performance.now() - walkStarted) / 1000).toFixed(1)} s`);
      const s = await run(
        'activity-1k',
        `GET …/activity, depth ${smallDepth * 100} of 1,000`,
        a,
        activityPage(small.namespace, [smallToken], smallCursor),
        { baseline: 'baseline-pg' },
      );
      const h = await run(
        'activity-100k',
        `GET …/activity, depth ${hugeDepth * 100} of 100,000`,
        a,
        activityPage(huge.namespace, [hugeToken], hugeCursor),
        { baseline: 'baseline-pg' },
      );
      if (s && h) {
        results.activityDepth = {
          small: { records: 1_000, depth: smallDepth * 100, p50: s.p50, rps: s.rps },
          huge: { records: 100_000, depth: hugeDepth * 100, p50: h.p50, rps: h.rps },
          ratio: round(s.rps / h.rps),
        };
      }
    }

    // Writes. Renames are spread over as many projects as connections, each by its owner (one
    // project renamed 50 times at once would measure its row lock).
    if (wanted('project-rename')) {
      const owners = await Promise.all(renamed.map((p) => login(p.members[0]!)));
      let n = 0;
      await run(
        'project-rename',
        'PATCH /v1/projects/:namespace (name)',
        a,
        () => {
          const i = n++ % renamed.length;
          return {
            method: 'PATCH',
            path: `/v1/projects/${renamed[i]!.namespace}`,
            headers: { authorization: `Bearer ${owners[i]}` },
            body: JSON.stringify({ name: `Renamed ${n}` }),
          };
        },
        { baseline: 'baseline-pg' },
      );
    }
    if (wanted('insight-create')) {
      const token = cycle(memberTokens);
      let n = 0;
      await run(
        'insight-create',
        'POST …/insights',
        a,
        () => ({
          method: 'POST',
          path: `/v1/projects/${largest}/insights`,
          headers: { authorization: `Bearer ${token()}` },
          body: JSON.stringify({ title: `Signups ${n++ % 1000}`, value: n, emoji: '📈' }),
        }),
        { baseline: 'baseline-pg' },
        201,
      );
    }
    // Increments of one insight, by all 20 members at once over 50 connections: the service's PATCH
    // against a hand-written `update … set value = value + 1` on the same row (also interleaved, below).
    let increment: (() => LoadRequest) | undefined;
    if (wanted('insight-increment') || wanted('baseline-increment') || wanted('insight-increment-interleaved')) {
      const token = cycle(memberTokens);
      const insights = await json<{ data: { items: { id: string; value: unknown }[] } }>(
        `${a.url}/v1/projects/${largest}/insights?limit=100`,
        'GET',
        undefined,
        token(),
      );
      const numeric = insights.data.items.find((insight) => typeof insight.value === 'number')!;
      increment = (): LoadRequest => ({
        method: 'PATCH',
        path: `/v1/projects/${largest}/insights/${numeric.id}`,
        headers: { authorization: `Bearer ${token()}` },
        body: JSON.stringify({ increment: 1 }),
      });
      await run('baseline-increment', 'baseline: Koa + pg insight increment', handWritten, increment);
      await run('insight-increment', 'PATCH …/insights/:id (increment, one insight)', a, increment, { baseline: 'baseline-increment' });
    }
    // Publishes to one project (a customer's burst), against a hand-written ingest of the same event
    // into the same table and indexes.
    if (wanted('event-publish') || wanted('baseline-ingest')) {
      const project = fixture.projects[1]!;
      const token = cycle(await Promise.all(project.members.map(login)));
      let n = 0;
      const publish = (): LoadRequest => ({
        method: 'POST',
        path: `/v1/projects/${project.namespace}/feeds/general/events`,
        headers: { authorization: `Bearer ${token()}` },
        body: JSON.stringify({
          event: 'New signup',
          description: `user ${n++}`,
          emoji: '🎉',
          tags: { plan: 'pro', seats: n % 10, trial: false },
          user_id: `user-${n % 500}`,
        }),
      });
      await run('baseline-ingest', 'baseline: Koa + pg ingest (one project)', handWritten, publish, {}, 201);
      await run('event-publish', 'POST …/feeds/general/events (publish, one project)', a, publish, { baseline: 'baseline-ingest' }, 201);
    }

    // Batches, the way high-volume producers send: 8 clients, each request 500 events to one project.
    if (wanted('event-batch')) {
      const project = fixture.projects[2]!;
      const token = cycle(await Promise.all(project.members.map(login)));
      const BATCH = 500;
      let n = 0;
      const batch = (): LoadRequest => ({
        method: 'POST',
        path: `/v1/projects/${project.namespace}/events`,
        headers: { authorization: `Bearer ${token()}` },
        body: JSON.stringify({
          events: Array.from({ length: BATCH }, () => ({ feed: 'general', event: 'Page view', tags: { page: `/p/${n++ % 100}` } })),
        }),
      });
      const scenario = await run('event-batch', `POST …/events (batches of ${BATCH}, 8 clients, one project)`, a, batch, {}, 201, 8);
      if (scenario) say(`  = ${Math.round(scenario.rps * BATCH)} events/s`);
    }

    // Ratios against the baselines of this run.
    for (const s of results.scenarios) {
      const base = results.scenarios.find((b) => b.name === s.baseline);
      if (base) s.ratio = { rps: round(s.rps / base.rps), p99: round(s.p99 / base.p99) };
    }

    // GET /v1's one scenario moves by ±10 % from run to run on a shared machine; alternating rounds hold the ratio steadier.
    if (wanted('root-interleaved')) results.rootInterleaved = await interleaved(measurement, a, bare, () => message, 'GET /v1');
    if (wanted('project-read-interleaved')) results.interleaved = await interleaved(measurement, a, handWritten, projectRead);
    if (increment && wanted('insight-increment-interleaved'))
      results.incrementInterleaved = await interleaved(measurement, a, handWritten, increment, 'Increment of one insight');
    if (wanted('stream'))
      results.stream = await streamLatency(measurement, a, env, fixture, await login(fixture.stream.members[0]!), children);
    if (wanted('signup-burst')) results.signupBurst = await signupBurst(measurement, a, fixture);
    results.rss = {
      idleMiB: idleRss,
      peakMiB: Math.max(0, ...results.scenarios.filter((s) => !s.name.startsWith('baseline')).map((s) => s.rssMiB ?? 0)),
    };
    if (wanted('routing')) {
      say('Routing + validation, in-process …');
      results.routing = await measureRouting();
      for (const r of results.routing)
        say(
          `  ${r.case}: full ${r.serviceFull} µs, one route ${r.serviceOne} µs (×${r.ratio}); openapi-backend matchOperation: ${r.openapiBackendMatchFull} µs vs ${r.openapiBackendMatchOne} µs`,
        );
    }
    // The in-process fixed cost and the cold starts last, with every other process stopped.
    for (const child of children) await child.stop();
    if (wanted('fixed-cost')) results.fixedCost = fixedCost();
    if (wanted('cold-start')) results.coldStart = await coldStart(measurement, env);

    results.machine.loadAfter = os.loadavg();
    say('');
    for (const s of results.scenarios) {
      if (s.ratio) say(`${s.label.padEnd(58)} ${s.ratio.rps.toFixed(2)}× the requests/s of ${s.baseline}, p99 ${s.ratio.p99.toFixed(2)}×`);
    }
    if (results.rss) say(`RSS of instance A: idle ${results.rss.idleMiB} MiB, peak under load ${results.rss.peakMiB} MiB`);
    if (write) {
      writeResults(results);
      say(
        `Wrote bench/${results.section === 'current' ? 'results' : `results-${results.section}`}.json and the "${results.section}" table of BENCHMARKS.md`,
      );
    }
  } finally {
    for (const child of children) await child.stop();
    if (!args['keep-db']) await db.drop();
    for (const entry of readdirSync(outDir)) {
      if (entry.startsWith('data') || entry === 'build') rmSync(path.join(outDir, entry), { recursive: true, force: true });
    }
  }
}

/** Rewrites the tables from the stored results (after a change to the report's layout). */
function render(): void {
  for (const file of readdirSync(path.join(root, 'bench')).filter((f) => /^results(-[\w-]+)?\.json$/.test(f))) {
    writeResults(JSON.parse(readFileSync(path.join(root, 'bench', file), 'utf8')) as Results);
    say(`Rendered ${file}`);
  }
}

(args.render ? Promise.resolve().then(render) : main()).catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
