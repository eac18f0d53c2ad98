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
 * (db/repositories/events.ts), and everything is analysed. The queries' ranges end where the fill
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
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { Migration } from '@mikro-orm/migrations';
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
const LIMIT = 50;
const HOUR_MS = 60 * 60_000;
const DAY_MS = 24 * HOUR_MS;
const FEED_SHARES = [50, 25, 13, 8, 4];
/** The hour buckets of a week up to an instant: from the hour holding it 7 days before to its own. */
const WEEK_HOURS = 7 * 24 + 1;
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
// The words of descriptions.

/** Words real descriptions might hold, most frequent first; then made-up ones to 2,000. */
const REAL_WORDS = (
  'customer order checkout account plan upgrade cart session mobile browser team workspace project report export import ' +
  'dashboard billing card refund subscription renewal coupon discount shipping delivery warehouse package address email ' +
  'password login logout profile avatar settings notification message comment reply share invite member role admin owner ' +
  'token key webhook retry timeout latency region server database cache queue worker job build release version branch'
).split(' ');
const VOCABULARY = (() => {
  const words = new Set(REAL_WORDS);
  const consonants = 'bdfgklmnprstvz';
  const vowels = 'aeiou';
  const syllables = [...consonants].flatMap((c) => [...vowels].map((v) => c + v));
  for (let i = 0; words.size < 2_000; i++) {
    const s = syllables.length;
    words.add(syllables[i % s]! + syllables[Math.floor(i / s) % s]! + syllables[Math.floor(i / s / s) % s]!);
  }
  return [...words];
})();
/** Each in about one event in 100,000. */
const RARE_WORDS = ['quokka', 'zeppelin', 'narwhal', 'axolotl', 'kumquat'];
const RARE_PER_DESCRIPTION = (RARE_WORDS.length * 1e-5) / 0.9;
const COMMON_WORD = VOCABULARY[0]!;
/** The 100th word, in about half a percent of events. */
const MIDDLE_WORD = VOCABULARY[99]!;

// ---------------------------------------------------------------------------------------------
// The fill.

/**
 * Rows i in [$5, $6) of project $1: `timestamp` and `created_at` advance evenly by $4 ms a row from
 * $3 (row $5's epoch milliseconds), the id is a UUID v7 of it, the feed one of the slots $2 at
 * random. Words are drawn from $8 and end users from 1..$7 by a Zipf law (floor((n + 1) ^ random())
 * is k with probability log(1 + 1/k) / log(n + 1)); a description ends in one of the rare words $9
 * with probability $10.
 */
const FILL = `
  with ${TAG_DOCUMENTS}, vocabulary as (select $8::text[] as w, (cardinality($8::text[]) + 1)::float8 as n)
  insert into events (id, project_id, feed_id, event, description, emoji, tags, user_id, notify, timestamp, created_at)
  select ${uuidV7Sql('r.ms')}, $1::uuid, ($2::uuid[])[1 + floor(random() * cardinality($2::uuid[]))::int],
         (${EVENT_NAMES_SQL})[1 + r.i % 7],
         case when r.i % 10 <> 9 then
           v.w[floor(v.n ^ random())::int] || ' ' || v.w[floor(v.n ^ random())::int] || ' ' ||
           v.w[floor(v.n ^ random())::int] || ' ' || v.w[floor(v.n ^ random())::int] ||
           case when random() < $10::float8 then ' ' || ($9::text[])[1 + floor(random() * cardinality($9::text[]))::int] else '' end
         end,
         (array['🎉', '💰', '🚀', null, null, '⚠️'])[1 + r.i % 6],
         d.docs[1 + floor(random() * 1000)::int],
         case when r.i % 10 <> 8 then 'user-' || floor(($7::int + 1)::float8 ^ random())::int end,
         r.i % 50 = 0,
         r.at, r.at
    from tag_documents d, vocabulary v, generate_series($5::bigint, $6::bigint - 1) as g(i),
         lateral (select g.i as i,
                         floor($3::float8 + (g.i - $5) * $4::float8)::bigint as ms,
                         timestamptz 'epoch' + floor($3::float8 + (g.i - $5) * $4::float8)::bigint * interval '1 millisecond' as at) as r`;

/** What the insert of events keeps up in `end_users` (INSERT_EVENTS, db/repositories/events.ts), for every event at once. */
const END_USERS = `
  insert into end_users (project_id, user_id, first_seen, last_seen, event_count)
  select project_id, user_id, min(timestamp), max(timestamp), count(*) from events where user_id is not null group by 1, 2`;

/**
 * The migrations' statements that fill `event_counts` from what is stored before them, in their
 * order (the first counts the events; a later one may add spans from those rows): what the insert
 * of events would have written. Read from the service's own migrations (`--service-root`).
 */
async function countsBackfill(): Promise<string[]> {
  const folder = path.join(serviceRootDir(), 'server/src/db/migrations');
  const statements: string[] = [];
  for (const file of readdirSync(folder)
    .filter((f) => /^Migration\d+_\w+\.ts$/.test(f))
    .sort()) {
    if (!readFileSync(path.join(folder, file), 'utf8').includes('insert into event_counts')) continue;
    const module = (await import(pathToFileURL(path.join(folder, file)).href)) as Record<string, new (...args: never[]) => Migration>;
    const migration = new module[file.replace(/\.ts$/, '')]!();
    void migration.up();
    statements.push(...migration.getQueries().filter((q): q is string => typeof q === 'string' && /^\s*insert into event_counts/.test(q)));
  }
  if (statements.length === 0) throw new Error(`no migration in ${folder} fills event_counts any more`);
  return statements;
}

/** How a project's events lie in time: evenly over the days, or every hour and feed of the last week first (the header comment). */
type Layout = 'spread' | 'full-week';

interface Project {
  id: string;
  namespace: string;
  events: number;
  users: number;
  layout: Layout;
  /** Its name in the report: its events, and the layout of a small one. */
  label: string;
  token: string;
}

interface Filled extends FillResult {
  aggregateMs: number;
  /** The instants the events span: the first of the D days, and the fill's now. */
  start: Date;
  end: Date;
  counts: { eventCounts: number; endUsers: number };
}

/** Rows [first, first + count) of a project, `step` ms apart from `startMs`, each in a feed drawn from `slots`. */
interface Run {
  first: number;
  count: number;
  startMs: number;
  step: number;
  slots: string[];
}

/**
 * A project's events as runs of FILL. `slots` holds each feed as many times as its share (of 100),
 * `feeds` each once, in the same order.
 */
function runs(project: Project, feeds: string[], slots: string[], startMs: number, endMs: number): Run[] {
  const spread = (first: number, count: number, from: number, until: number): Run => ({
    first,
    count,
    startMs: from,
    step: (until - from) / count,
    slots,
  });
  if (project.layout === 'spread') return [spread(0, project.events, startMs, endMs)];
  // One event per feed in each of the week's hours, the last of them the one `endMs` is in: each
  // feed's at its own fraction of the time that hour has had by `endMs`, so none is after it.
  const lastHour = Math.floor(endMs / HOUR_MS) * HOUR_MS;
  const firstHour = lastHour - (WEEK_HOURS - 1) * HOUR_MS;
  const rest = project.events - WEEK_HOURS * feeds.length;
  return [
    ...(rest > 0 ? [spread(0, rest, startMs, firstHour)] : []),
    ...feeds.map((feed, k) => ({
      first: rest + k * WEEK_HOURS,
      count: WEEK_HOURS,
      startMs: firstHour + Math.floor((k * (endMs - lastHour)) / feeds.length),
      step: HOUR_MS,
      slots: [feed],
    })),
  ];
}

async function fill(client: pg.Client, projects: Project[]): Promise<Filled> {
  const endMs = Date.now();
  const startMs = endMs - DAYS * DAY_MS;
  let aggregateMs = 0;
  const insert = async (project: Project) => {
    const feeds = (
      await rows<{ id: string }>(client, `select id from feeds where project_id = $1 order by name <> 'general', name`, [project.id])
    ).map((feed) => feed.id);
    if (feeds.length !== FEED_SHARES.length) throw new Error(`${project.namespace} has ${feeds.length} feeds, not ${FEED_SHARES.length}`);
    const slots = feeds.flatMap((feed, k) => Array<string>(FEED_SHARES[k]!).fill(feed));
    let inserted = 0;
    for (const run of runs(project, feeds, slots, startMs, endMs)) {
      for (let from = run.first; from < run.first + run.count; from += 1_000_000) {
        const until = Math.min(run.first + run.count, from + 1_000_000);
        await client.query(FILL, [
          project.id,
          run.slots,
          run.startMs + (from - run.first) * run.step,
          run.step,
          from,
          until,
          project.users,
          VOCABULARY,
          RARE_WORDS,
          RARE_PER_DESCRIPTION,
        ]);
        inserted += until - from;
        note(`  ${project.namespace}: inserted ${inserted.toLocaleString('en')} of ${project.events.toLocaleString('en')} events`);
      }
    }
  };
  const filled = await fillWithoutIndexes(client, 'events', async () => {
    for (const project of projects) await insert(project);
    const started = performance.now();
    await client.query(`set work_mem = '256MB'`);
    for (const statement of await countsBackfill()) await client.query(statement);
    await client.query(END_USERS);
    await client.query('reset work_mem');
    aggregateMs = performance.now() - started;
    note(`  event_counts and end_users in ${(aggregateMs / 1000).toFixed(0)} s`);
  });
  const [counts] = await rows<{ eventCounts: number; endUsers: number }>(
    client,
    `select (select count(*) from event_counts)::int as "eventCounts", (select count(*) from end_users)::int as "endUsers"`,
  );
  return { ...filled, aggregateMs, start: new Date(startMs), end: new Date(endMs), counts: counts! };
}

// ---------------------------------------------------------------------------------------------
// The queries.

type Kind = 'counts' | 'journey' | 'search';

interface Shape {
  id: string;
  kind: Kind;
  label: string;
  /** The paths sent, in turn, per project. */
  paths: Map<string, string[]>;
  /** What the paths are, per project, for the report (matches, users). */
  about: Map<string, string>;
  /** The repository call behind it, for --explain. */
  statement: (project: Project) => Statement;
  /** Measured beside the targets, with none of its own. */
  extra?: boolean;
  /** Counts: the `event_counts` rows its statement reads, per project, what its cost follows. */
  rollups?: Map<string, number>;
  /** Counts: the layout of the small project its "within 1.2×" is held to (the header comment says why). */
  against?: Layout;
}

type Statement = { kind: 'counts'; interval: 'day' | 'hour'; from: Date; to: Date } | { kind: 'events'; userId?: string; words?: string };

const eventsPath = (p: Project, query: Record<string, string>) =>
  `/v1/projects/${p.namespace}/events?${new URLSearchParams({ limit: String(LIMIT), ...query }).toString()}`;
const countsPath = (p: Project, query: Record<string, string>) =>
  `/v1/projects/${p.namespace}/events/counts?${new URLSearchParams(query).toString()}`;
const SEARCHED = "to_tsvector('simple'::regconfig, e.event || ' ' || coalesce(e.description, ''))";

async function shapes(client: pg.Client, projects: Project[], filled: Filled): Promise<Shape[]> {
  // Up to the fill's now, not the clock's: the buckets are then those the full-week project was
  // filled for, and as many as the labels say, even when an hour or a day has turned since.
  const { start: fillStart, end: now } = filled;
  const weekAgo = new Date(now.getTime() - 7 * DAY_MS);
  const out: Shape[] = [];
  const each = (f: (p: Project) => [string[], string]) => {
    const paths = new Map<string, string[]>();
    const about = new Map<string, string>();
    for (const p of projects) {
      const [list, text] = f(p);
      paths.set(p.id, list);
      about.set(p.id, text);
    }
    return { paths, about };
  };
  const month = { from: fillStart.toISOString(), to: now.toISOString() };
  const week = { from: weekAgo.toISOString(), to: now.toISOString() };
  // In UTC a bucket is one row per feed with events in it, of its own length (countsPerFeed).
  const rollups = async (interval: 'day' | 'hour', from: Date) => {
    const read = new Map<string, number>();
    for (const p of projects) {
      const [row] = await rows<{ n: number }>(
        client,
        `select count(*)::int as n from event_counts
          where project_id = $1 and span = $2 and start >= date_trunc($3, $4::timestamptz, 'UTC')
            and start < date_trunc($3, $5::timestamptz, 'UTC') + ('1 ' || $3)::interval`,
        [p.id, interval === 'day' ? 86_400 : 3_600, interval, from.toISOString(), now.toISOString()],
      );
      read.set(p.id, row!.n);
    }
    return read;
  };
  const days = { rollups: await rollups('day', fillStart), against: 'spread' as const };
  const hours = { rollups: await rollups('hour', weekAgo), against: 'full-week' as const };
  out.push({
    id: 'counts-day',
    kind: 'counts',
    label: `counts, interval=day, ${DAYS} days`,
    ...each((p) => [[countsPath(p, { interval: 'day', ...month })], `${DAYS + 1} buckets`]),
    statement: () => ({ kind: 'counts', interval: 'day', from: fillStart, to: now }),
    ...days,
  });
  out.push({
    id: 'counts-day-feeds',
    kind: 'counts',
    label: `counts, interval=day, ${DAYS} days, group_by=feed`,
    ...each((p) => [[countsPath(p, { interval: 'day', ...month, group_by: 'feed' })], `5 series of ${DAYS + 1}`]),
    statement: () => ({ kind: 'counts', interval: 'day', from: fillStart, to: now }),
    ...days,
  });
  out.push({
    id: 'counts-hour',
    kind: 'counts',
    label: 'counts, interval=hour, 7 days',
    ...each((p) => [[countsPath(p, { interval: 'hour', ...week })], `${WEEK_HOURS} buckets`]),
    statement: () => ({ kind: 'counts', interval: 'hour', from: weekAgo, to: now }),
    ...hours,
  });
  out.push({
    id: 'counts-hour-feeds',
    kind: 'counts',
    label: 'counts, interval=hour, 7 days, group_by=feed',
    ...each((p) => [[countsPath(p, { interval: 'hour', ...week, group_by: 'feed' })], `5 series of ${WEEK_HOURS}`]),
    statement: () => ({ kind: 'counts', interval: 'hour', from: weekAgo, to: now }),
    ...hours,
  });

  const busiest = new Map<string, { user_id: string; n: number }>();
  const sampled = new Map<string, { user_id: string; n: number }[]>();
  for (const p of projects) {
    const [top] = await rows<{ user_id: string; n: number }>(
      client,
      'select user_id, event_count::int as n from end_users where project_id = $1 order by event_count desc limit 1',
      [p.id],
    );
    busiest.set(p.id, top!);
    sampled.set(
      p.id,
      await rows<{ user_id: string; n: number }>(
        client,
        'select user_id, event_count::int as n from end_users where project_id = $1 order by random() limit $2',
        [p.id, REQUESTS],
      ),
    );
  }
  out.push({
    id: 'journey-busiest',
    kind: 'journey',
    label: 'journey (`user_id=`), the busiest end user',
    ...each((p) => [[eventsPath(p, { user_id: busiest.get(p.id)!.user_id })], `${busiest.get(p.id)!.n.toLocaleString('en')} events`]),
    statement: (p) => ({ kind: 'events', userId: busiest.get(p.id)!.user_id }),
  });
  out.push({
    id: 'journey-any',
    kind: 'journey',
    label: 'journey (`user_id=`), end users in turn',
    ...each((p) => {
      const users = sampled.get(p.id)!;
      const counts = users.map((u) => u.n).sort((a, b) => a - b);
      return [
        users.map((u) => eventsPath(p, { user_id: u.user_id })),
        `${users.length} of ${p.users.toLocaleString('en')}, median ${percentile(counts, 50)} events (${counts[0]}–${counts.at(-1)!.toLocaleString('en')})`,
      ];
    }),
    statement: (p) => ({ kind: 'events', userId: sampled.get(p.id)![0]!.user_id }),
  });

  // How many events each word is in: counted by the index for the rarer ones; for the common word
  // on the big project, from the statistics ANALYZE keeps of the index's expression.
  const [stats] = await rows<{ elems: string[] | null; freqs: number[] | null }>(
    client,
    `select most_common_elems::text::text[] as elems, most_common_elem_freqs as freqs from pg_stats where tablename = 'events_search_index'`,
  );
  const matches = async (p: Project, word: string): Promise<string> => {
    if (word === COMMON_WORD && p.events > 100_000) {
      const i = stats?.elems?.indexOf(word) ?? -1;
      return i < 0 ? 'share unknown' : `about ${(100 * stats!.freqs![i]!).toFixed(0)} % of events (pg_stats)`;
    }
    const [row] = await rows<{ n: number }>(
      client,
      `select count(*)::int as n from events e where e.project_id = $1 and ${SEARCHED} @@ plainto_tsquery('simple'::regconfig, $2)`,
      [p.id, word],
    );
    return `${row!.n.toLocaleString('en')} events`;
  };
  for (const [id, word, what, extra] of [
    ['search-rare', RARE_WORDS[0]!, 'a rare word', false],
    ['search-common', COMMON_WORD, 'a common word', false],
    ['search-middle', MIDDLE_WORD, 'a word in ~0.5 % of events', true],
  ] as const) {
    const about = new Map<string, string>();
    for (const p of projects) about.set(p.id, await matches(p, word));
    out.push({
      id,
      kind: 'search',
      label: `search (\`q=${word}\`), ${what}`,
      paths: new Map(projects.map((p) => [p.id, [eventsPath(p, { q: word })]])),
      about,
      statement: () => ({ kind: 'events', words: word }),
      extra,
    });
  }
  return out;
}

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
// The plans (--explain): the service's own repositories, run against a stand-in connection that
// explains each statement before running it.

interface Plan {
  shape: string;
  sql: string;
  custom: string;
  generic: string;
}

type EventsRepository = typeof import('../server/src/db/repositories/events.js');
type CountsRepository = typeof import('../server/src/db/repositories/event-counts.js');

function literal(client: pg.Client, value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return client.escapeLiteral(value);
  if (Array.isArray(value)) return `${client.escapeLiteral(JSON.stringify(value).replace(/^\[/, '{').replace(/\]$/, '}'))}`;
  throw new Error(`no literal for ${JSON.stringify(value)}`);
}

/** An entity manager as db/raw.ts's `query` uses it, whose one connection explains what it is asked, then runs it. */
function explaining(client: pg.Client, captured: Omit<Plan, 'shape'>[]): never {
  const connection = {
    query: async ({ text, values }: { text: string; values: unknown[] }) => {
      const plan = (r: pg.QueryResult) => r.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      const custom = plan(await client.query(`explain (analyze, buffers) ${text}`, values));
      await client.query(`prepare sb_explain as ${text}`);
      await client.query('set plan_cache_mode = force_generic_plan');
      const generic = plan(
        await client.query(`explain (analyze, buffers) execute sb_explain(${values.map((v) => literal(client, v)).join(', ')})`),
      );
      await client.query('reset plan_cache_mode');
      await client.query('deallocate sb_explain');
      captured.push({ sql: text, custom, generic });
      // The rows themselves too, for the repository to map.
      return client.query(text, values);
    },
  };
  const knex = { client: { acquireConnection: () => Promise.resolve(connection), releaseConnection: () => undefined } };
  return { getConnection: () => ({ getKnex: () => knex }), getTransactionContext: () => undefined } as never;
}

async function explain(client: pg.Client, all: Shape[], big: Project): Promise<Plan[]> {
  const from = (file: string) => pathToFileURL(path.join(serviceRootDir(), 'server/src/db/repositories', file)).href;
  const events = (await import(from('events.ts'))) as EventsRepository;
  const counts = (await import(from('event-counts.ts'))) as CountsRepository;
  const plans: Plan[] = [];
  for (const shape of all) {
    if (shape.id.endsWith('-feeds')) continue; // the same statement as without group_by
    const captured: Omit<Plan, 'shape'>[] = [];
    const em = explaining(client, captured);
    const s = shape.statement(big);
    if (s.kind === 'counts') {
      // The range bucketsBetween would answer: from the start of `from`'s bucket to the end of `to`'s, in UTC.
      const unit = s.interval === 'day' ? DAY_MS : 60 * 60_000;
      const start = new Date(Math.floor(s.from.getTime() / unit) * unit);
      const until = new Date(Math.floor(s.to.getTime() / unit) * unit + unit);
      await counts.countsPerFeed(em, { projectId: big.id, interval: s.interval, zone: 'UTC', from: start, until });
    } else {
      await events.eventsPage(em, { projectId: big.id, userId: s.userId, words: s.words, tags: [], limit: LIMIT + 1 });
    }
    plans.push(...captured.map((c) => ({ shape: shape.label, ...c })));
  }
  return plans;
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
    const filled = await fill(client, projects);
    note(
      `  filled in ${((filled.insertMs + filled.indexMs + filled.vacuumMs) / 1000).toFixed(0)} s (indexes ${(filled.indexMs / 1000).toFixed(0)} s)`,
    );

    const all = await shapes(client, projects, filled);
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
