/**
 * `npm run bench:retention` (`npx tsx bench/retention.ts`): does event retention delete a backlog of
 * expired events without slowing publishes? The BENCHMARKS.md target "Retention deletes 1 million
 * expired events without a publish slower than 2× its usual p99", on a table of 10 million events.
 *
 * On the PostgreSQL server of the admin URL it creates a fresh database `sb_retention_<ts>`, builds
 * and starts the service as users run it (bench/processes.ts; its migrations create the schema),
 * seeds accounts, projects and feeds (bench/seed.ts) and fills `events` in SQL: N rows evenly over
 * the last D days (a tenth of them older than 90 days at the defaults), ids UUID v7 of their
 * `created_at`, half of them in one big project, the indexes built after the insert as a restore
 * would. Then 50 connections publish single events to the big project's `general` feed while 2 read
 * its newest page (autocannon):
 *
 * 1. usual: retention off, a 3 s warm-up, then S seconds measured (bench/load.ts);
 * 2. retention on: the service restarted with EVENT_RETENTION_DAYS=90 under the same load until no
 *    event older than the cutoff is left. Its maintenance runs every 5 minutes, which no setting
 *    changes: a preload edits `MAINTENANCE_DEFAULTS` before the service starts, for a first run 16 s
 *    after start and then one every --interval-ms after the previous one ended. Runs (each one's end
 *    from the service's `pruned` log line, its start an interval after the previous end) alternate
 *    with pauses, so the publishes in flight during a run are compared with those entirely between
 *    runs, from the same seconds of the same process: the shared machine's drift falls on both, and
 *    their ratio is the deletion's cost.
 *
 * A run deletes batches of 5,000 events with 50 ms between them, as shipped, but at most 20 batches:
 * the shipped cap, 200, would delete a 1-million backlog in a single run and leave no seconds
 * between runs to compare with. What a publisher feels is the batch and the pause, not the count.
 *
 * Prints the report on stdout (progress on stderr) and writes it into bench/retention-results.md
 * between the `<!-- retention:start -->` and `<!-- retention:end -->` markers (appended at the end if
 * they are missing); the rest of that file is written by hand and kept as it is. The services' logs
 * stay in a temporary folder; the database is dropped at the end.
 *
 * Options:
 *   --admin-url URL       the server (default DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres)
 *   --events N            rows to fill (default 10000000); --days D  the days they span (default 100)
 *   --retention DAYS      EVENT_RETENTION_DAYS of the retention run (default 90)
 *   --seconds S           the usual window (default 20); --connections N  publishers (default 50)
 *   --interval-ms MS      maintenance interval during the retention run (default 3000)
 *   --event-batch-size N, --event-max-batches N, --event-pause-ms MS   a run's batches (default 5000, 20, 50)
 *   --no-write            print only; --keep-db  do not drop the database
 */
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { firstUuidV7At } from '../server/src/domain/retention.js';
import type { MaintenanceOptions } from '../server/src/maintenance/prune.js';
import { freshDatabase } from '../tests/support/pg-cluster.js';
import {
  EVENT_NAMES_SQL,
  fillWithoutIndexes,
  loadAverage,
  machine as describeMachine,
  progress,
  rows,
  TAG_DOCUMENTS,
  uuidV7Sql,
  writeGeneratedBlock,
  type FillResult,
} from './bulk.js';
import { load, percentile, probe, type LoadRequest, type LoadResult } from './load.js';
import { buildService, root, serviceCommand, startService, type Child } from './processes.js';
import { json, median, round, sleep } from './run.js';
import { seed, type Fixture } from './seed.js';

const { values: args } = parseArgs({
  options: {
    'admin-url': { type: 'string' },
    events: { type: 'string', default: '10000000' },
    days: { type: 'string', default: '100' },
    retention: { type: 'string', default: '90' },
    seconds: { type: 'string', default: '20' },
    connections: { type: 'string', default: '50' },
    'interval-ms': { type: 'string', default: '3000' },
    'event-batch-size': { type: 'string', default: '5000' },
    'event-max-batches': { type: 'string', default: '20' },
    'event-pause-ms': { type: 'string', default: '50' },
    'no-write': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
  },
});

const adminUrl = args['admin-url'] || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const EVENTS = Number(args.events);
const DAYS = Number(args.days);
const RETENTION_DAYS = Number(args.retention);
const SECONDS = Number(args.seconds);
const CONNECTIONS = Number(args.connections);
const READERS = 2;
const INTERVAL_MS = Number(args['interval-ms']);
const FIRST_RUN_MS = 16_000;
const MAINTENANCE: Pick<MaintenanceOptions, 'eventBatchSize' | 'eventMaxBatches' | 'eventBatchPauseMs'> = {
  eventBatchSize: Number(args['event-batch-size']),
  eventMaxBatches: Number(args['event-max-batches']),
  eventBatchPauseMs: Number(args['event-pause-ms']),
};
/** Past it the deletion is reported as unfinished, with its figures so far. */
const DELETION_DEADLINE_MS = 10 * 60_000;
const DAY_MS = 24 * 60 * 60_000;
const RESULTS_FILE = path.join(root, 'bench', 'retention-results.md');
const START_MARK = '<!-- retention:start -->';
const END_MARK = '<!-- retention:end -->';

const outDir = path.join(os.tmpdir(), `signalboard-retention-${Date.now()}`);
const logFile = (name: string) => path.join(outDir, `${name}.log`);
const benchStarted = performance.now();
const note = progress();

// ---------------------------------------------------------------------------------------------
// The load of the retention run: autocannon until stopped, every answer kept with the moment it
// completed, so that the windows (in a run, between runs) are cut afterwards from the same load.

interface Sample {
  end: number;
  ms: number;
  ok: boolean;
}

interface Stream {
  samples: Sample[];
  stop(): Promise<void>;
}

/** Every stream started and not yet stopped: a failed step leaves none running. */
const streams = new Set<Stream>();

function startStream(url: string, connections: number, next: () => LoadRequest): Stream {
  const samples: Sample[] = [];
  let finished!: () => void;
  const done = new Promise<void>((resolve) => (finished = resolve));
  const instance = autocannon(
    {
      url,
      connections,
      duration: 3_600,
      requests: [
        {
          setupRequest: (request) => {
            const r = next();
            const headers = { ...r.headers, ...(r.body ? { 'content-type': 'application/json' } : {}) };
            return { ...request, method: r.method, path: r.path, headers, body: r.body };
          },
        },
      ],
    },
    () => finished(),
  );
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    samples.push({ end: performance.now(), ms, ok: status >= 200 && status < 300 });
  });
  instance.on('reqError', () => samples.push({ end: performance.now(), ms: NaN, ok: false }));
  const stream: Stream = {
    samples,
    stop: async () => {
      streams.delete(stream);
      instance.stop();
      await done;
    },
  };
  streams.add(stream);
  return stream;
}

interface Window {
  seconds: number;
  requests: number;
  /** 2xx answers a second. */
  rps: number;
  p50: number;
  p99: number;
  max: number;
  failed: number;
  /** 2xx answers slower than the threshold given. */
  slow?: number;
}

function summarize(inside: Sample[], seconds: number, slowerThan?: number): Window {
  const ok = Float64Array.from(inside.filter((s) => s.ok).map((s) => s.ms)).sort();
  return {
    seconds: round(seconds, 1),
    requests: inside.length,
    rps: seconds > 0 ? round(ok.length / seconds, 0) : NaN,
    p50: round(percentile(ok, 50)),
    p99: round(percentile(ok, 99)),
    max: round(ok.at(-1) ?? NaN),
    failed: inside.length - ok.length,
    slow: slowerThan === undefined ? undefined : ok.filter((ms) => ms > slowerThan).length,
  };
}

const fromLoad = (r: LoadResult): Window => ({ ...r, failed: r.non2xx + r.errors });

// ---------------------------------------------------------------------------------------------
// The fill.

/**
 * 1,000 (project, feed) slots each row picks one of at random: half the events go to one big
 * project, the rest to the others by a Zipf law, and within a project half to `general` and the
 * rest in decreasing shares to its four other feeds.
 */
async function slots(client: pg.Client, fixture: Fixture): Promise<{ projects: string[]; feeds: string[] }> {
  const projects = [fixture.largest, ...fixture.projects.slice(1), fixture.smallLog, fixture.hugeLog, fixture.stream];
  const feeds = await rows<{ id: string; project_id: string }>(client, `select id, project_id from feeds order by name <> 'general', name`);
  const harmonic = projects.slice(1).reduce((sum, _, i) => sum + 1 / (i + 1), 0);
  const feedShares = [0.5, 0.25, 0.13, 0.08, 0.04];
  const weights = projects.flatMap((p, i) =>
    feeds
      .filter((f) => f.project_id === p.id)
      .map((f, k) => ({ project: p.id, feed: f.id, w: (i === 0 ? 0.5 : 0.5 / (i * harmonic)) * (feedShares[k] ?? 0) })),
  );
  const total = weights.reduce((a, b) => a + b.w, 0);
  // Largest-remainder rounding to exactly 1,000 slots.
  const exact = weights.map((x) => (1000 * x.w) / total);
  const counts = exact.map(Math.floor);
  const order = exact.map((n, i) => ({ i, r: n - Math.floor(n) })).sort((a, b) => b.r - a.r);
  for (let k = 0; counts.reduce((a, b) => a + b, 0) < 1000; k++) counts[order[k]!.i]! += 1;
  const out = { projects: [] as string[], feeds: [] as string[] };
  weights.forEach((x, i) => {
    for (let n = 0; n < counts[i]!; n++) {
      out.projects.push(x.project);
      out.feeds.push(x.feed);
    }
  });
  return out;
}

/** Rows i in [$5, $6): `created_at` advances evenly from $3 by $4 ms a row; the id is a UUID v7 of it. */
const FILL = `
  with ${TAG_DOCUMENTS}
  insert into events (id, project_id, feed_id, event, description, emoji, tags, timestamp, created_at)
  select ${uuidV7Sql('r.ms')},
         ($1::uuid[])[r.slot], ($2::uuid[])[r.slot],
         (${EVENT_NAMES_SQL})[1 + r.i % 7],
         case when r.i % 3 <> 0 then 'Customer ' || (r.i % 9973) || ', order ' || r.i end,
         (array['🎉', '💰', '🚀', null, null, '⚠️'])[1 + r.i % 6],
         d.docs[1 + floor(random() * 1000)::int],
         r.at, r.at
    from tag_documents d, generate_series($5::bigint, $6::bigint - 1) as g(i),
         lateral (select g.i as i,
                         $3::bigint + floor(g.i * $4::float8)::bigint as ms,
                         timestamptz 'epoch' + ($3::bigint + floor(g.i * $4::float8)::bigint) * interval '1 millisecond' as at,
                         1 + floor(random() * 1000)::int as slot) as r`;

/**
 * Fills `events` as a restore would (bench/bulk.ts): the rows inserted in id order without the
 * migrations' indexes and with the foreign-key triggers skipped (the rows reference seeded
 * projects and feeds by construction), the same indexes built again, then VACUUM ANALYZE.
 */
async function fill(client: pg.Client, to: { projects: string[]; feeds: string[] }): Promise<FillResult> {
  const startMs = Date.now() - DAYS * DAY_MS;
  const stepMs = (DAYS * DAY_MS) / EVENTS;
  return fillWithoutIndexes(client, 'events', async () => {
    for (let from = 0; from < EVENTS; from += 1_000_000) {
      const until = Math.min(EVENTS, from + 1_000_000);
      await client.query(FILL, [to.projects, to.feeds, startMs, stepMs, from, until]);
      note(`  inserted ${until.toLocaleString('en')} of ${EVENTS.toLocaleString('en')} events`);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The service and its load.

/** Node options for a service whose maintenance runs first after `FIRST_RUN_MS`, then `INTERVAL_MS` after each run, with `MAINTENANCE`'s batches. */
function maintenancePreload(): string[] {
  const module = pathToFileURL(path.join(root, 'dist/server/src/maintenance/prune.js')).href;
  const code =
    `import { MAINTENANCE_DEFAULTS as d } from ${JSON.stringify(module)};\n` +
    `Object.assign(d, ${JSON.stringify({ ...MAINTENANCE, intervalMs: FIRST_RUN_MS })});\n` +
    `setTimeout(() => { d.intervalMs = ${INTERVAL_MS}; }, ${FIRST_RUN_MS - 1_000}).unref();\n`;
  return ['--import', `data:text/javascript,${encodeURIComponent(code)}`];
}

interface Traffic {
  publish: () => LoadRequest;
  read: () => LoadRequest;
}

/** Single events to the big project's `general` feed, and its newest page, with its members' sessions in turn. */
function traffic(namespace: string, tokens: string[]): Traffic {
  let n = 0;
  const auth = () => ({ authorization: `Bearer ${tokens[n++ % tokens.length]!}` });
  return {
    publish: () => ({
      method: 'POST',
      path: `/v1/projects/${namespace}/feeds/general/events`,
      headers: auth(),
      body: JSON.stringify({
        event: 'New signup',
        description: `user ${n}`,
        emoji: '🎉',
        tags: { plan: 'pro', seats: n % 10, trial: false },
      }),
    }),
    read: () => ({ method: 'GET', path: `/v1/projects/${namespace}/events`, headers: auth() }),
  };
}

/** Retention off: a warm-up, then `SECONDS` of publishing and reading at once. */
async function usual(child: Child, work: Traffic): Promise<{ publish: Window; read: Window }> {
  const both = (seconds: number) =>
    Promise.all([
      load(child.url, { connections: CONNECTIONS, seconds, next: work.publish }),
      load(child.url, { connections: READERS, seconds, next: work.read }),
    ]);
  await both(3);
  const [publish, read] = await both(SECONDS);
  return { publish: fromLoad(publish), read: fromLoad(read) };
}

interface RetentionResult {
  expired: number;
  cutoff: string;
  finished: boolean;
  /** Wall time from the start of the first run to the end of the last, and the part of it runs took. */
  deleteSeconds: number;
  runSeconds: number;
  /** The runs that deleted expired events (epoch ms), and their counts. */
  runs: { start: number; end: number; events: number }[];
  /** Median duration of a full run after a full run. */
  fullRunMs: number;
  whole: { publish: Window; read: Window };
  inRuns: { publish: Window; read: Window };
  betweenRuns: { publish: Window; read: Window };
}

/** Retention on, under the usual load, until no event older than the cutoff is left. */
async function retention(client: pg.Client, child: Child, work: Traffic): Promise<RetentionResult> {
  const cutoff = firstUuidV7At(new Date(Date.now() - RETENTION_DAYS * DAY_MS));
  const [{ expired }] = (await rows<{ expired: number }>(client, 'select count(*)::int as expired from events where id < $1', [
    cutoff,
  ])) as [{ expired: number }];
  const oldest = async () => (await rows<{ id: string }>(client, 'select (select id from events order by id limit 1)::text as id'))[0]!.id;
  await probe(child.url, work.publish(), 201);
  await probe(child.url, work.read(), 200);
  const publish = startStream(child.url, CONNECTIONS, work.publish);
  const read = startStream(child.url, READERS, work.read);
  const first = await oldest();
  const watchStarted = performance.now();
  let from: number | undefined;
  let to: number | undefined;
  let reported = 0;
  while (performance.now() - watchStarted < DELETION_DEADLINE_MS) {
    const at = performance.now();
    const now = await oldest();
    if (from === undefined && now !== first) from = at;
    if (now >= cutoff) {
      to = at;
      break;
    }
    if (from !== undefined && at - reported > 10_000) {
      reported = at;
      note(`  deleting: oldest event now ${now.slice(0, 13)}… (cutoff ${cutoff.slice(0, 13)}…)`);
    }
    await sleep(250);
  }
  const finished = to !== undefined;
  to ??= performance.now();
  from ??= to;
  await Promise.all([publish.stop(), read.stop()]);
  if (!finished) note(`  retention did not finish within ${DELETION_DEADLINE_MS / 60_000} minutes: figures so far`);

  // The service's `pruned` lines give each run's end and count. A run starts an interval after the
  // previous one ended; the first, when the oldest event first changed (polled every 250 ms, so up
  // to that much earlier; a short run may have ended by then). Between two runs, a pause.
  const epoch = (perf: number) => performance.timeOrigin + perf;
  const logged = readFileSync(logFile('service-retention'), 'utf8')
    .split('\n')
    .filter((line) => line.includes('"msg":"pruned"'))
    .map((line) => JSON.parse(line) as { time: number; events: number });
  const runs = logged
    .map((r, i) => ({
      start: i === 0 ? Math.min(epoch(from) - 250, r.time) : logged[i - 1]!.time + INTERVAL_MS,
      end: r.time,
      events: r.events,
    }))
    .filter((run) => run.end >= epoch(watchStarted) && run.start <= epoch(to));
  const pauses = runs.slice(1).map((run, k) => ({ start: runs[k]!.end, end: run.start }));
  const seconds = (xs: { start: number; end: number }[]) => xs.reduce((a, s) => a + (s.end - s.start), 0) / 1000;
  const deletion = { start: runs[0]?.start ?? epoch(from), end: runs.at(-1)?.end ?? epoch(to) };
  const full = MAINTENANCE.eventBatchSize * MAINTENANCE.eventMaxBatches;
  const fullRuns = runs.slice(1).flatMap((run, k) => (run.events === full && runs[k]!.events === full ? [run.end - run.start] : []));

  /** The answers that completed within the deletion; those in flight at some moment of a run; those entirely within a pause. */
  const split = (samples: Sample[]) => {
    const span = (s: Sample) => ({ start: epoch(s.end - (s.ms || 0)), end: epoch(s.end) });
    const overlaps = (s: Sample) => runs.some((run) => span(s).start <= run.end && span(s).end >= run.start);
    const within = (s: Sample) => pauses.some((pause) => span(s).start >= pause.start && span(s).end <= pause.end);
    const whole = samples.filter((s) => span(s).end >= deletion.start && span(s).end <= deletion.end);
    return { whole, inRuns: whole.filter(overlaps), between: whole.filter(within) };
  };
  const p = split(publish.samples);
  const r = split(read.samples);
  const slow = 2 * summarize(p.between, 0).p99;
  return {
    expired,
    cutoff,
    finished,
    deleteSeconds: round((deletion.end - deletion.start) / 1000, 1),
    runSeconds: round(seconds(runs), 1),
    runs,
    fullRunMs: fullRuns.length ? median(fullRuns) : NaN,
    whole: {
      publish: summarize(p.whole, (deletion.end - deletion.start) / 1000),
      read: summarize(r.whole, (deletion.end - deletion.start) / 1000),
    },
    inRuns: { publish: summarize(p.inRuns, seconds(runs), slow), read: summarize(r.inRuns, seconds(runs)) },
    betweenRuns: { publish: summarize(p.between, seconds(pauses), slow), read: summarize(r.between, seconds(pauses)) },
  };
}

// ---------------------------------------------------------------------------------------------

interface Results {
  when: string;
  seconds: number;
  machine: string;
  loadBefore: number[];
  loadAfter: number[];
  fill: FillResult;
  usual: { publish: Window; read: Window };
  retention: RetentionResult;
}

async function main(): Promise<Results> {
  mkdirSync(outDir, { recursive: true });
  const machine = await describeMachine(adminUrl);
  const loadBefore = loadAverage();
  note(`Logs: ${outDir}`);
  const db = await freshDatabase(adminUrl, 'sb_retention');
  note(`Database ${db.name}`);
  const env = {
    DATABASE_URL: db.url,
    LOG_LEVEL: 'info',
    AUTH_RATE_LIMIT: '0',
    API_RATE_LIMIT: '0',
    BCRYPT_ROUNDS: '10',
    DATA_DIR: path.join(outDir, 'data'),
  };
  const children: Child[] = [];
  const client = new pg.Client({ connectionString: db.url });
  // The database is dropped WITH (FORCE) at the end, even after a failure: a session it ends is no news.
  client.on('error', () => undefined);
  await client.connect();
  try {
    note(`Built the service in ${(buildService() / 1000).toFixed(0)} s`);
    // Retention off: the fill must stay whole until the retention run.
    const plain = await startService('service-usual', { ...env, EVENT_RETENTION_DAYS: '0' }, logFile('service-usual'));
    children.push(plain);
    const fixture = await seed(db.url, {
      users: 200,
      projects: 20,
      membersPerProject: 10,
      feedsPerProject: 5,
      insightsPerProject: 0,
      largestActivity: 0,
      smallLog: 0,
      hugeLog: 0,
    });
    note(`Filling ${EVENTS.toLocaleString('en')} events over ${DAYS} days …`);
    const filled = await fill(client, await slots(client, fixture));
    note(`  filled in ${((filled.insertMs + filled.indexMs + filled.vacuumMs) / 1000).toFixed(0)} s`);

    // Sessions through the real login route, for the big project's members.
    const tokens: string[] = [];
    for (const member of fixture.largest.members) {
      const login = { login: fixture.users[member]!.username, password: fixture.password };
      tokens.push((await json<{ data: { token: string } }>(`${plain.url}/v1/auth/login`, 'POST', login)).data.token);
    }
    const work = traffic(fixture.largest.namespace, tokens);

    note(`Usual publish, retention off: ${SECONDS} s …`);
    const usualResult = await usual(plain, work);
    note(`  publish p50 ${usualResult.publish.p50} ms, p99 ${usualResult.publish.p99} ms, ${usualResult.publish.rps}/s`);
    await plain.stop();

    note(`Retention on (EVENT_RETENTION_DAYS=${RETENTION_DAYS}, a run every ${INTERVAL_MS} ms) under the same load …`);
    const pruning = await startService(
      'service-retention',
      { ...env, EVENT_RETENTION_DAYS: String(RETENTION_DAYS) },
      logFile('service-retention'),
      maintenancePreload(),
    );
    children.push(pruning);
    const retentionResult = await retention(client, pruning, work);
    note(`  ${retentionResult.expired.toLocaleString('en')} events in ${retentionResult.deleteSeconds} s`);
    await pruning.stop();
    return {
      when: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      seconds: round((performance.now() - benchStarted) / 1000, 0),
      machine,
      loadBefore,
      loadAfter: loadAverage(),
      fill: filled,
      usual: usualResult,
      retention: retentionResult,
    };
  } catch (error) {
    // Shown before the clean-up, which ends sessions the failed step may still be using.
    console.error(error);
    throw error;
  } finally {
    await Promise.all([...streams].map((stream) => stream.stop()));
    await client.end().catch(() => undefined);
    for (const child of children) await child.stop();
    if (!args['keep-db']) {
      await db.drop();
      note(`Dropped ${db.name}`);
    }
    rmSync(path.join(outDir, 'data'), { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The report.

const n0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : '—');
const ms = (n: number) => (Number.isFinite(n) ? `${n} ms` : '—');
const x = (a: number, b: number) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : '—');

function windowRow(label: string, w: Window, base?: Window): string {
  const ratio = (k: 'p50' | 'p99' | 'max') => (base ? ` (${x(w[k], base[k])})` : '');
  return `| ${label} | ${n0(w.rps)} | ${ms(w.p50)}${ratio('p50')} | ${ms(w.p99)}${ratio('p99')} | ${ms(w.max)}${ratio('max')} | ${w.failed} |`;
}

function render(r: Results): string {
  const { usual: u, retention: ret, fill } = r;
  const i = ret.inRuns.publish;
  const b = ret.betweenRuns.publish;
  const runEvents = MAINTENANCE.eventBatchSize * MAINTENANCE.eventMaxBatches;
  const runs = `${ret.runs.length} run${ret.runs.length === 1 ? '' : 's'}`;
  const [verdict, detail] = !Number.isFinite(b.p99)
    ? ['not measured', `No publish fell entirely between two runs: the backlog went in ${runs} (\`--event-max-batches\` splits it).`]
    : i.p99 > 2 * b.p99
      ? ['not met', '']
      : i.slow === 0
        ? ['met', 'Not one publish in flight during a run took twice the between-runs p99.']
        : [
            'met on the p99',
            `${n0(i.slow ?? 0)} of ${n0(i.requests)} publishes in flight during a run took more than twice the between-runs p99, against ${n0(b.slow ?? 0)} of ${n0(b.requests)} between runs.`,
          ];
  return [
    `## Latest run: ${n0(EVENTS)} events`,
    '',
    `Generated by \`npm run bench:retention\` (bench/retention.ts) on ${r.when} in ${r.seconds} s. Machine: ${r.machine}. Load average ${r.loadBefore.join(' ')} before, ${r.loadAfter.join(' ')} after. The service runs as users run it (\`${serviceCommand()}\`), with API_RATE_LIMIT=0 and AUTH_RATE_LIMIT=0; the load generator shares the machine, so the comparison that counts is between windows of the same run.`,
    '',
    `**Requirement (no publish slower than 2× its usual p99 while ${n0(ret.expired)} expired events are deleted): ${verdict}.**${detail ? ` ${detail}` : ''} Publishes in flight during a deletion run against those entirely between runs, in the same seconds: p99 ${x(i.p99, b.p99)} (${ms(i.p99)} against ${ms(b.p99)}), p50 ${x(i.p50, b.p50)}, max ${x(i.max, b.max)}. Against the usual run (retention off, minutes earlier) the whole deletion's publish p99 is ${x(ret.whole.publish.p99, u.publish.p99)}.`,
    '',
    `- Table: ${n0(EVENTS)} events over ${DAYS} days (${n0(EVENTS / DAYS)} a day), half of them in the big project the load publishes to; filled in SQL in ${((fill.insertMs + fill.indexMs + fill.vacuumMs) / 1000).toFixed(1)} s (insert ${(fill.insertMs / 1000).toFixed(1)} s, indexes ${(fill.indexMs / 1000).toFixed(1)} s, VACUUM ANALYZE ${(fill.vacuumMs / 1000).toFixed(1)} s), ${n0(fill.bytes / 2 ** 20)} MiB with its indexes.`,
    `- Load: ${CONNECTIONS} connections publishing single events to the big project's \`general\` feed, ${READERS} reading its newest page; usual: ${SECONDS} s after a 3 s warm-up.`,
    `- Retention: EVENT_RETENTION_DAYS=${RETENTION_DAYS}; a run every ${INTERVAL_MS} ms (the first ${FIRST_RUN_MS / 1000} s after start) deletes at most ${MAINTENANCE.eventMaxBatches} batch${MAINTENANCE.eventMaxBatches === 1 ? '' : 'es'} of ${n0(MAINTENANCE.eventBatchSize)} events, ${MAINTENANCE.eventBatchPauseMs} ms apart.`,
    `- Expired at the start: **${n0(ret.expired)}** events (cutoff id \`${ret.cutoff}\`). ${ret.finished ? 'All deleted' : '**Not all deleted before the bench gave up**'} in **${ret.deleteSeconds} s** of wall time, of which runs took ${ret.runSeconds} s (${n0(ret.expired / ret.runSeconds)} events/s while a run goes); ${runs} (${ret.runs
      .slice(0, 12)
      .map((run) => n0(run.events))
      .join(
        ', ',
      )}${ret.runs.length > 12 ? ', …' : ''}), ${Number.isFinite(ret.fullRunMs) ? `a full one (${n0(runEvents)} events) took ${(ret.fullRunMs / 1000).toFixed(2)} s (median)` : 'never two full ones in a row to time one'}.`,
    '',
    '| window | answers/s | p50 | p99 | max | failed |',
    '|---|---:|---:|---:|---:|---:|',
    windowRow(`publish, usual (retention off; ${u.publish.seconds} s)`, u.publish),
    windowRow(`publish, entirely between runs (${b.seconds} s)`, b, u.publish),
    windowRow(`**publish in flight during a run** (${i.seconds} s), against between runs`, i, b),
    windowRow(`publish, the whole deletion (${ret.whole.publish.seconds} s)`, ret.whole.publish, u.publish),
    windowRow('read, usual', u.read),
    windowRow('read, entirely between runs', ret.betweenRuns.read, u.read),
    windowRow('**read in flight during a run**, against between runs', ret.inRuns.read, ret.betweenRuns.read),
    windowRow('read, the whole deletion', ret.whole.read, u.read),
  ].join('\n');
}

/** Rewrites the generated block of bench/retention-results.md, keeping the rest of the file. */
function write(report: string): void {
  writeGeneratedBlock(RESULTS_FILE, { start: START_MARK, end: END_MARK }, report, '# Event retention');
  note('Wrote bench/retention-results.md');
}

main().then(
  (results) => {
    const report = render(results);
    process.stdout.write(report + '\n');
    if (!args['no-write']) write(report);
    process.exit(0);
  },
  (error: unknown) => {
    console.error(error);
    // Whatever a failed step left behind (a socket, a load) must not keep the process running.
    process.exit(1);
  },
);
