/**
 * The data of `npm run bench:queries` (bench/event-queries.ts, whose header comment says how the
 * events lie): the words of descriptions, and the fill of `events`, `event_counts` and `end_users` in
 * SQL for the seeded projects.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type { Migration } from '@mikro-orm/migrations';
import { EVENT_NAMES_SQL, fillWithoutIndexes, rows, TAG_DOCUMENTS, uuidV7Sql, type FillResult } from './bulk.js';
import { serviceRootDir } from './processes.js';

export const HOUR_MS = 60 * 60_000;
export const DAY_MS = 24 * HOUR_MS;
export const FEED_SHARES = [50, 25, 13, 8, 4];
/** The hour buckets of a week up to an instant: from the hour holding it 7 days before to its own. */
export const WEEK_HOURS = 7 * 24 + 1;

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
export const RARE_WORDS = ['quokka', 'zeppelin', 'narwhal', 'axolotl', 'kumquat'];
const RARE_PER_DESCRIPTION = (RARE_WORDS.length * 1e-5) / 0.9;
export const COMMON_WORD = VOCABULARY[0]!;
/** The 100th word, in about half a percent of events. */
export const MIDDLE_WORD = VOCABULARY[99]!;

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

/** What the insert of events keeps up in `end_users` (INSERT_EVENTS, db/repositories/events-rows.ts), for every event at once. */
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

/** How a project's events lie in time: evenly over the days, or every hour and feed of the last week first (bench/event-queries.ts's header comment). */
export type Layout = 'spread' | 'full-week';

export interface Project {
  id: string;
  namespace: string;
  events: number;
  users: number;
  layout: Layout;
  /** Its name in the report: its events, and the layout of a small one. */
  label: string;
  token: string;
}

export interface Filled extends FillResult {
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

/** Fills the projects' events over the last `days` days, then what is kept up from them; `note` reports the progress. */
export async function fill(client: pg.Client, projects: Project[], days: number, note: (text: string) => void): Promise<Filled> {
  const endMs = Date.now();
  const startMs = endMs - days * DAY_MS;
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
