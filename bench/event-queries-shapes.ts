/**
 * The queries `npm run bench:queries` (bench/event-queries.ts) measures, each with the paths it sends
 * per project and the repository call behind it, and their plans (`--explain`): the service's own
 * repositories run against a connection that explains each statement.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { rows } from './bulk.js';
import { COMMON_WORD, DAY_MS, MIDDLE_WORD, RARE_WORDS, WEEK_HOURS, type Filled, type Layout, type Project } from './event-queries-fill.js';
import { percentile } from './load.js';
import { serviceRootDir } from './processes.js';

/** The page size of the events queries. */
export const LIMIT = 50;

// ---------------------------------------------------------------------------------------------
// The queries.

type Kind = 'counts' | 'journey' | 'search';

export interface Shape {
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
  /** Counts: the layout of the small project its "within 1.2×" is held to (bench/event-queries.ts's header comment says why). */
  against?: Layout;
}

type Statement = { kind: 'counts'; interval: 'day' | 'hour'; from: Date; to: Date } | { kind: 'events'; userId?: string; words?: string };

const eventsPath = (p: Project, query: Record<string, string>) =>
  `/v1/projects/${p.namespace}/events?${new URLSearchParams({ limit: String(LIMIT), ...query }).toString()}`;
const countsPath = (p: Project, query: Record<string, string>) =>
  `/v1/projects/${p.namespace}/events/counts?${new URLSearchParams(query).toString()}`;
const SEARCHED = "to_tsvector('simple'::regconfig, e.event || ' ' || coalesce(e.description, ''))";

/** The queries on `projects`, over the `run.days` the fill spans; the journeys of end users in turn take `run.requests` of them. */
export async function shapes(
  client: pg.Client,
  projects: Project[],
  filled: Filled,
  run: { days: number; requests: number },
): Promise<Shape[]> {
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
    label: `counts, interval=day, ${run.days} days`,
    ...each((p) => [[countsPath(p, { interval: 'day', ...month })], `${run.days + 1} buckets`]),
    statement: () => ({ kind: 'counts', interval: 'day', from: fillStart, to: now }),
    ...days,
  });
  out.push({
    id: 'counts-day-feeds',
    kind: 'counts',
    label: `counts, interval=day, ${run.days} days, group_by=feed`,
    ...each((p) => [[countsPath(p, { interval: 'day', ...month, group_by: 'feed' })], `5 series of ${run.days + 1}`]),
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
        [p.id, run.requests],
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
// The plans (--explain): the service's own repositories, run against a stand-in connection that
// explains each statement before running it.

export interface Plan {
  shape: string;
  sql: string;
  custom: string;
  generic: string;
}

type EventsRepository = typeof import('../server/src/db/repositories/events-rows.js');
type CountsRepository = typeof import('../server/src/db/repositories/event-counts-rows.js');

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

export async function explain(client: pg.Client, all: Shape[], big: Project): Promise<Plan[]> {
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
