/**
 * `npm run bench:queries` (`npx tsx bench/event-queries.ts`): do the events' reads cost the same on
 * ten million events as on a thousand? The BENCHMARKS.md targets for `GET …/events/counts` (p50 ≤
 * 20 ms, p99 ≤ 50 ms on 10 million events, within 20 % of a 1,000-event project) and for a page of
 * `GET …/events` filtered by one end user (`user_id=`) or by words (`q=`) (p50 ≤ 20 ms on 10
 * million events).
 *
 * On the PostgreSQL server of the admin URL it creates a fresh database `sb_queries_<ts>`, builds
 * and starts the service as users run it (bench/processes.ts; its migrations create the schema),
 * seeds three projects of 5 feeds (bench/seed.ts) and fills `events` in SQL (bench/bulk.ts: indexes
 * built after the rows): N events in the first and 1,000 (`--small-events`) in each of the others.
 * The first two ("spread") have theirs evenly over the last D days, each in a feed drawn by the
 * feeds' shares (50, 25, 13, 8 and 4 %). The third ("full week") has one event in every hour and feed of the last week
 * (169 hours of 5 feeds: 845 events) and the rest evenly over the days before it, their feeds drawn
 * the same way. Of each project's events 9 in 10 carry a `user_id` drawn from U end users by a Zipf
 * law of exponent 1 (user k with probability ∝ log(1 + 1/k): `floor((U + 1) ^ random())`), U =
 * 100,000 on the big project and as many events per end user on the small ones; 9 in 10 have a
 * description of four words drawn by the same law from a vocabulary of 2,000 (`customer`, the
 * first, is in about a third of all events), and a description in about 18,000 (5.6e-5) also ends in
 * one of five rare words, so each of them is in about one event in 100,000. Then `event_counts` and
 * `end_users` are filled from the events of all three by one aggregate insert each, the migration's
 * own backfill statement (Migration20261129000000) and what the insert of events keeps up
 * (db/repositories/events-rows.ts), and everything is analysed. The queries' ranges end where the fill
 * does, so a week of hours is the full-week project's 169 hours however long the fill took.
 *
 * Which 1,000-event project the counts' "within 1.2×" is held to: a counts answer costs about one
 * `event_counts` row per (bucket, feed) that holds events, read and carried to the answer, whatever
 * the number of events in it; the answer itself has every bucket either way. A week of hours on the
 * big project reads all 845 rows, on the spread 1,000 at most about 234 (1,000 events over 30 days
 * leave most hours of the small feeds empty): that ratio weighs how full the week is, not how many
 * events there are, so the two hour queries are judged against the full-week project, which reads the
 * same 845 rows with 1,000 events (and as many heap pages, on a 200,000-event run). 30 days of
 * days read 155 rows (31 days of 5 feeds) on the big project and not quite as many on the spread
 * 1,000, about 140: the 4 % feed's 40 events leave about a quarter of its days empty, the 8 % feed's
 * a few. That is close enough that the day queries stay judged against the spread project; the
 * report counts the rows each project's queries read. Every query is measured on all three, and the
 * report shows the big project's ratio to both small ones.
 *
 * Every request goes over HTTP to the running service, and its latency is taken at the client
 * (from the request's start to the answer's last byte): on one keep-alive connection, each query
 * is sent `--warmup` times per project, then `--requests` times per project in blocks of 25 that
 * alternate between the three projects (so that a shared machine's drift falls on all). Then each
 * query again from `--connections` connections at once for `--seconds` per project (autocannon).
 *
 * Prints the report on stdout (progress on stderr) and writes it into
 * bench/event-queries-results.md between the `<!-- event-queries:start -->` and
 * `<!-- event-queries:end -->` markers; the rest of that file is written by hand and kept. With
 * `--explain`, EXPLAIN (ANALYZE, BUFFERS) of the statement behind each query on the big project,
 * as the service writes it (its repositories run against a stand-in connection), with the values
 * known (a custom plan) and as a generic plan (what a prepared statement may settle on after five
 * executions), goes in the report too. The database is dropped at the end.
 *
 * Options:
 *   --admin-url URL       the server (default DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres)
 *   --events N            events of the big project (default 10000000); --small-events N  of each other one (default 1000, at least 845)
 *   --days D              the days they span, up to now (default 30); --users U  end users of the big project (default 100000)
 *   --requests N          sequential requests per query and project (default 200), after --warmup N (default 20)
 *   --connections N       concurrent connections of the second pass (default 4, 0 to skip it); --seconds S  per query and project (default 5)
 *   --explain             the plans; --service-root DIR  build and run the service of another checkout
 *   --no-write            print only; --keep-db  do not drop the database
 */
import http from 'node:http';
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { freshDatabase } from '../tests/support/pg-cluster.js';
import { loadAverage, machine as describeMachine, progress, writeGeneratedBlock } from './bulk.js';
import { FEED_SHARES, fill, WEEK_HOURS, type Filled, type Project } from './event-queries-fill.js';
import { explain, LIMIT, shapes, type Plan, type Shape } from './event-queries-shapes.js';
import { load, percentile, probe, type LoadRequest, type LoadResult } from './load.js';
import { buildService, root, serviceCommand, serviceRootDir, setServiceRoot, startService, type Child } from './processes.js';
import { json, round } from './run.js';
import { seed } from './seed.js';

const { values: args } = parseArgs({
  options: {
    'admin-url': { type: 'string' },
    events: { type: 'string', default: '10000000' },
    'small-events': { type: 'string', default: '1000' },
    days: { type: 'string', default: '30' },
    users: { type: 'string', default: '100000' },
    requests: { type: 'string', default: '200' },
    warmup: { type: 'string', default: '20' },
    connections: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '5' },
    explain: { type: 'boolean', default: false },
    'service-root': { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
  },
});

const adminUrl = args['admin-url'] || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const EVENTS = Number(args.events);
const SMALL_EVENTS = Number(args['small-events']);
const DAYS = Number(args.days);
const USERS = Number(args.users);
/** As many events per end user on the small projects as on the big one, and at least 10 end users. */
const SMALL_USERS = Math.max(10, Math.round((USERS * SMALL_EVENTS) / EVENTS));
const REQUESTS = Number(args.requests);
const WARMUP = Number(args.warmup);
const BLOCK = 25;
const CONNECTIONS = Number(args.connections);
const SECONDS = Number(args.seconds);
// The full-week project needs an event for every hour and feed of the week, and days before it for the rest.
if (SMALL_EVENTS < WEEK_HOURS * FEED_SHARES.length || DAYS <= 7) {
  throw new Error(`--small-events must be at least ${WEEK_HOURS * FEED_SHARES.length} and --days above 7`);
}
const RESULTS_FILE = path.join(root, 'bench', 'event-queries-results.md');
const MARKS = { start: '<!-- event-queries:start -->', end: '<!-- event-queries:end -->' };
if (args['service-root']) setServiceRoot(args['service-root']);

const outDir = path.join(os.tmpdir(), `signalboard-queries-${Date.now()}`);
const logFile = (name: string) => path.join(outDir, `${name}.log`);
const benchStarted = performance.now();
const note = progress();

// ---------------------------------------------------------------------------------------------
// Measuring.

interface Figure {
  n: number;
  p50: number;
  p99: number;
  max: number;
  /** Items of the first answer (a page), or the sum of its counts (counts). */
  answer: number;
  /** Counts: the first answer's buckets over all its series, and those with events. */
  buckets?: { all: number; nonZero: number };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One GET on the keep-alive connection: its status, body and milliseconds from the request's start to the body's last byte. */
function get(base: URL, pathname: string, token: string): Promise<{ status: number; body: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const request = http.get(
      { agent, host: base.hostname, port: base.port, path: pathname, headers: { authorization: `Bearer ${token}` } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
  });
}

interface CountsAnswer {
  data: { series: { feed: string | null; buckets: { count: number }[] }[] };
}
interface PageAnswer {
  data: { items: unknown[] };
}

function answerSize(shape: Shape, body: string): Pick<Figure, 'answer' | 'buckets'> {
  if (shape.kind !== 'counts') return { answer: (JSON.parse(body) as PageAnswer).data.items.length };
  const buckets = (JSON.parse(body) as CountsAnswer).data.series.flatMap((s) => s.buckets);
  return {
    answer: buckets.reduce((sum, b) => sum + b.count, 0),
    buckets: { all: buckets.length, nonZero: buckets.filter((b) => b.count > 0).length },
  };
}

/** Sequential requests, one connection: warm-up, then blocks alternating between the projects. */
async function sequential(child: Child, shape: Shape, projects: Project[]): Promise<Map<string, Figure>> {
  const base = new URL(child.url);
  const samples = new Map<string, number[]>(projects.map((p) => [p.id, []]));
  const answers = new Map<string, Pick<Figure, 'answer' | 'buckets'>>();
  const turn = new Map<string, number>(projects.map((p) => [p.id, 0]));
  const send = async (p: Project, keep: boolean) => {
    const list = shape.paths.get(p.id)!;
    const i = turn.get(p.id)!;
    turn.set(p.id, i + 1);
    const r = await get(base, list[i % list.length]!, p.token);
    if (r.status !== 200) throw new Error(`${shape.id} on ${p.namespace}: ${r.status} ${r.body.slice(0, 300)}`);
    if (!answers.has(p.id)) answers.set(p.id, answerSize(shape, r.body));
    if (keep) samples.get(p.id)!.push(r.ms);
  };
  for (const p of projects) for (let i = 0; i < WARMUP; i++) await send(p, false);
  for (let done = 0; done < REQUESTS; done += BLOCK)
    for (const p of projects) for (let i = 0; i < Math.min(BLOCK, REQUESTS - done); i++) await send(p, true);
  return new Map(
    projects.map((p) => {
      const sorted = Float64Array.from(samples.get(p.id)!).sort();
      return [
        p.id,
        {
          n: sorted.length,
          p50: round(percentile(sorted, 50)),
          p99: round(percentile(sorted, 99)),
          max: round(sorted.at(-1) ?? NaN),
          ...answers.get(p.id)!,
        },
      ];
    }),
  );
}

/** `CONNECTIONS` connections at once for `SECONDS`, per project. */
async function concurrent(child: Child, shape: Shape, projects: Project[]): Promise<Map<string, LoadResult>> {
  const out = new Map<string, LoadResult>();
  for (const p of projects) {
    const list = shape.paths.get(p.id)!;
    let i = 0;
    const next = (): LoadRequest => ({ method: 'GET', path: list[i++ % list.length]!, headers: { authorization: `Bearer ${p.token}` } });
    await probe(child.url, next(), 200);
    out.set(p.id, await load(child.url, { connections: CONNECTIONS, seconds: SECONDS, next }));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

interface Row {
  shape: Shape;
  seq: Map<string, Figure>;
  conc?: Map<string, LoadResult>;
}

interface Results {
  when: string;
  seconds: number;
  machine: string;
  load: { before: number[]; during: number[]; after: number[] };
  fill: Filled;
  projects: Project[];
  rows: Row[];
  plans: Plan[];
}

async function main(): Promise<Results> {
  mkdirSync(outDir, { recursive: true });
  const machine = await describeMachine(adminUrl);
  const loadBefore = loadAverage();
  note(`Logs: ${outDir}; load average ${loadBefore.join(' ')}`);
  const db = await freshDatabase(adminUrl, 'sb_queries');
  note(`Database ${db.name}`);
  const env = {
    DATABASE_URL: db.url,
    LOG_LEVEL: 'info',
    AUTH_RATE_LIMIT: '0',
    API_RATE_LIMIT: '0',
    BCRYPT_ROUNDS: '10',
    // Retention off: the fill spans the days it was asked to.
    EVENT_RETENTION_DAYS: '0',
    DATA_DIR: path.join(outDir, 'data'),
  };
  let child: Child | undefined;
  const client = new pg.Client({ connectionString: db.url });
  // The database is dropped WITH (FORCE) at the end, even after a failure: a session it ends is no news.
  client.on('error', () => undefined);
  await client.connect();
  try {
    note(`Built the service (${serviceRootDir()}) in ${(buildService() / 1000).toFixed(0)} s`);
    child = await startService('service', env, logFile('service'));
    const fixture = await seed(db.url, {
      users: 20,
      projects: 3,
      membersPerProject: 2,
      feedsPerProject: FEED_SHARES.length,
      insightsPerProject: 0,
      largestActivity: 0,
      smallLog: 0,
      hugeLog: 0,
    });
    const projects: Project[] = [];
    for (const [seeded, events, users, layout, label] of [
      [fixture.projects[0]!, EVENTS, USERS, 'spread', EVENTS.toLocaleString('en')],
      [fixture.projects[1]!, SMALL_EVENTS, SMALL_USERS, 'spread', `${SMALL_EVENTS.toLocaleString('en')} spread`],
      [fixture.projects[2]!, SMALL_EVENTS, SMALL_USERS, 'full-week', `${SMALL_EVENTS.toLocaleString('en')} full week`],
    ] as const) {
      const login = { login: fixture.users[seeded.members[0]!]!.username, password: fixture.password };
      const token = (await json<{ data: { token: string } }>(`${child.url}/v1/auth/login`, 'POST', login)).data.token;
      projects.push({ id: seeded.id, namespace: seeded.namespace, events, users, layout, label, token });
    }
    const [big, , full] = projects as [Project, Project, Project];
    note(`Filling ${projects.map((p) => p.label).join(' + ')} events over ${DAYS} days …`);
    const filled = await fill(client, projects, DAYS, note);
    note(
      `  filled in ${((filled.insertMs + filled.indexMs + filled.vacuumMs) / 1000).toFixed(0)} s (indexes ${(filled.indexMs / 1000).toFixed(0)} s)`,
    );

    const all = await shapes(client, projects, filled, { days: DAYS, requests: REQUESTS });
    const during: number[] = [];
    const sampler = setInterval(() => during.push(os.loadavg()[0]!), 5_000);
    const results: Row[] = [];
    try {
      for (const shape of all) {
        const seq = await sequential(child, shape, projects);
        const figures = projects.map((p) => seq.get(p.id)!);
        note(
          `  ${shape.label}: p50 ${figures.map((f) => f.p50).join(' / ')} ms, p99 ${figures.map((f) => f.p99).join(' / ')} ms (${projects.map((p) => p.label).join(' / ')})`,
        );
        results.push({ shape, seq });
      }
      if (CONNECTIONS > 0) {
        note(`${CONNECTIONS} connections, ${SECONDS} s per query and project …`);
        for (const row of results) row.conc = await concurrent(child, row.shape, projects);
      }
    } finally {
      clearInterval(sampler);
    }
    for (const row of results) {
      if (row.shape.id === 'counts-day') {
        for (const p of projects)
          if (row.seq.get(p.id)!.answer !== p.events)
            note(`  warning: ${p.namespace}'s day counts sum to ${row.seq.get(p.id)!.answer}, not its ${p.events} events`);
      }
      // What makes the full-week project the hour queries' reference.
      const buckets = row.seq.get(full.id)!.buckets;
      if (row.shape.against === 'full-week' && buckets!.nonZero !== buckets!.all)
        note(`  warning: ${full.namespace}'s ${row.shape.label} has ${buckets!.all - buckets!.nonZero} of ${buckets!.all} buckets empty`);
    }
    let plans: Plan[] = [];
    if (args.explain) {
      note('Plans …');
      plans = await explain(client, all, big);
    }
    return {
      when: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      seconds: round((performance.now() - benchStarted) / 1000, 0),
      machine,
      load: { before: loadBefore, during: [Math.min(...during), Math.max(...during)].map((n) => round(n)), after: loadAverage() },
      fill: filled,
      projects,
      rows: results,
      plans,
    };
  } catch (error) {
    console.error(error);
    throw error;
  } finally {
    agent.destroy();
    await client.end().catch(() => undefined);
    await child?.stop();
    if (args['keep-db']) note(`Kept ${db.name}: ${db.url}`);
    else {
      await db.drop();
      note(`Dropped ${db.name}`);
    }
    rmSync(path.join(outDir, 'data'), { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The report.

const n0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : '—');
const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '—');
const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? (a / b).toFixed(2) : '—');

/**
 * The target of a query on the big project, and whether it is met (undefined: none); a counts
 * query's ratio is taken against `reference`, the small project its `against` names.
 */
function verdict(shape: Shape, big: Figure, reference: Project, ref: Figure): { target: string; met?: boolean } {
  if (shape.extra) return { target: 'none (measured beside the targets)' };
  if (shape.kind === 'counts') {
    return {
      target: `p50 ≤ 20, p99 ≤ 50, p50 ≤ 1.2× the ${reference.label}`,
      met: big.p50 <= 20 && big.p99 <= 50 && big.p50 <= 1.2 * ref.p50,
    };
  }
  return { target: 'p50 ≤ 20', met: big.p50 <= 20 };
}

function render(r: Results): string {
  const [big, ...small] = r.projects as [Project, ...Project[]];
  const [spread, full] = small as [Project, Project];
  const f = r.fill;
  const rollups = (id: string, p: Project) => n0(r.rows.find((row) => row.shape.id === id)?.shape.rollups?.get(p.id) ?? NaN);
  const lines = [
    `## Latest run: ${n0(EVENTS)} events`,
    '',
    `Generated by \`npm run bench:queries\` (bench/event-queries.ts) on ${r.when} in ${r.seconds} s. Machine: ${r.machine}. Load average ${r.load.before.join(' ')} before, ${r.load.during.join('–')} (1 min) while measuring, ${r.load.after.join(' ')} after: the machine is shared, so figures move from run to run; the ratios are taken in the same minutes. The service runs as users run it (\`${serviceCommand()}\`), with API_RATE_LIMIT=0 and AUTH_RATE_LIMIT=0; latencies are taken at the client, over HTTP on loopback, from the request's start to the answer's last byte.`,
    '',
    `- Data: ${n0(big.events)} events in \`${big.namespace}\`, ${n0(spread.events)} in \`${spread.namespace}\` (spread) and ${n0(full.events)} in \`${full.namespace}\` (full week), 5 feeds each (50/25/13/8/4 %). The first two have their events evenly over the last ${DAYS} days, in feeds drawn by those shares; the full-week one has one in every hour and feed of the last 7 days (${n0(WEEK_HOURS * FEED_SHARES.length)}) and the rest evenly over the days before, drawn the same way. 9 in 10 with a \`user_id\` of ${n0(big.users)} and ${n0(spread.users)} end users (Zipf, exponent 1), 9 in 10 with four words of a 2,000-word vocabulary (Zipf), one in about 100,000 with each rare word. Filled in SQL in ${((f.insertMs + f.indexMs + f.vacuumMs) / 1000).toFixed(0)} s (rows and aggregates ${(f.insertMs / 1000).toFixed(0)} s, of which \`event_counts\` and \`end_users\` ${(f.aggregateMs / 1000).toFixed(0)} s; indexes ${(f.indexMs / 1000).toFixed(0)} s; VACUUM ANALYZE ${(f.vacuumMs / 1000).toFixed(0)} s), \`events\` ${n0(f.bytes / 2 ** 20)} MiB with its indexes; ${n0(f.counts.eventCounts)} \`event_counts\` rows, ${n0(f.counts.endUsers)} end users.`,
    `- Sequential: one keep-alive connection, ${WARMUP} warm-up requests per query and project, then ${REQUESTS} in blocks of ${BLOCK} alternating between the three projects. Pages are \`limit=${LIMIT}\`; counts in UTC, up to the instant the fill ended.`,
    `- Which small project a counts query's "p50 ≤ 1.2×" is held to (its ratio in bold): a counts answer costs about one \`event_counts\` row read per bucket and feed holding events ("rollup rows" below), not per event, and has every bucket either way. ${DAYS} days of days read ${rollups('counts-day', big)} rows on the ${big.label}-event project and ${rollups('counts-day', spread)} on the ${spread.label}, so the day queries are held to the ${spread.label}. A week of hours reads ${rollups('counts-hour', big)} on the ${big.label} but ${rollups('counts-hour', spread)} on the ${spread.label}: that ratio weighs how full the week is rather than how many events there are, so the hour queries are held to the ${full.label} (${rollups('counts-hour', full)} rows: one per hour and feed); their ratio to the ${spread.label} is still shown.`,
    '',
  ];
  const reference = (shape: Shape) => small.find((p) => p.layout === (shape.against ?? 'spread'))!;
  const verdicts = r.rows.map((row) => {
    const ref = reference(row.shape);
    return { row, ...verdict(row.shape, row.seq.get(big.id)!, ref, row.seq.get(ref.id)!) };
  });
  const judged = verdicts.filter((v) => v.met !== undefined);
  const missed = judged.filter((v) => !v.met).map((v) => v.row.shape.label);
  lines.push(
    `**Targets: ${judged.length - missed.length} of ${judged.length} met**${missed.length ? ` (not met: ${missed.join('; ')})` : ''}.`,
    '',
    `| query | events | p50 ms | p99 ms | max ms | ${small.map((p) => `${big.label} ÷ ${p.label} (p50, p99)`).join(' | ')} | answer | target | met |`,
    `|---|---:|---:|---:|---:|${small.map(() => '---:|').join('')}---|---|---|`,
  );
  for (const [i, row] of r.rows.entries()) {
    const b = row.seq.get(big.id)!;
    const v = verdicts[i]!;
    const answer = (p: Project, fig: Figure) =>
      fig.buckets
        ? `sum ${n0(fig.answer)}; ${row.shape.about.get(p.id)}, ${n0(fig.buckets.nonZero)} non-zero; ${n0(row.shape.rollups?.get(p.id) ?? NaN)} rollup rows`
        : `${fig.answer} items; ${row.shape.about.get(p.id)}`;
    const ratios = small.map((p) => {
      const s = row.seq.get(p.id)!;
      const p50 = ratio(b.p50, s.p50);
      return `${row.shape.kind === 'counts' && p === reference(row.shape) ? `**${p50}**` : p50}, ${ratio(b.p99, s.p99)}`;
    });
    lines.push(
      `| ${row.shape.label} | ${big.label} | **${ms(b.p50)}** | ${ms(b.p99)} | ${ms(b.max)} | ${ratios.join(' | ')} | ${answer(big, b)} | ${v.target} | ${v.met === undefined ? '—' : v.met ? 'yes' : '**no**'} |`,
    );
    for (const p of small) {
      const s = row.seq.get(p.id)!;
      lines.push(`| | ${p.label} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${small.map(() => ' |').join('')} ${answer(p, s)} | | |`);
    }
  }
  if (r.rows.some((row) => row.conc)) {
    lines.push(
      '',
      `${CONNECTIONS} connections at once, ${SECONDS} s per query and project (autocannon; its per-response times):`,
      '',
      `| query | ${r.projects.map((p) => `${p.label}: answers/s | p50 ms | p99 ms`).join(' | ')} | non-2xx |`,
      `|---|${r.projects.map(() => '---:|---:|---:|').join('')}---:|`,
    );
    for (const row of r.rows) {
      const all = r.projects.map((p) => row.conc!.get(p.id)!);
      lines.push(
        `| ${row.shape.label} | ${all.map((c) => `${n0(c.rps)} | ${ms(c.p50)} | ${ms(c.p99)}`).join(' | ')} | ${all.reduce((n, c) => n + c.non2xx + c.errors, 0)} |`,
      );
    }
  }
  if (r.plans.length > 0) {
    lines.push(
      '',
      `Plans on the ${n0(big.events)}-event project (\`--explain\`): EXPLAIN (ANALYZE, BUFFERS) of the statement each query runs, as the service's repository writes it, with its values (a custom plan) and as the generic plan a prepared statement may settle on.`,
    );
    for (const plan of r.plans) {
      lines.push(
        '',
        `<details><summary>${plan.shape}</summary>`,
        '',
        '```sql',
        plan.sql.replace(/\s+/g, ' ').trim(),
        '```',
        '',
        'Custom plan:',
        '',
        '```',
        plan.custom,
        '```',
        '',
        'Generic plan:',
        '',
        '```',
        plan.generic,
        '```',
        '',
        '</details>',
      );
    }
  }
  return lines.join('\n');
}

main().then(
  (results) => {
    const report = render(results);
    process.stdout.write(report + '\n');
    if (!args['no-write']) {
      writeGeneratedBlock(RESULTS_FILE, MARKS, report, '# Event queries on 10 million events');
      note('Wrote bench/event-queries-results.md');
    }
    process.exit(0);
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
