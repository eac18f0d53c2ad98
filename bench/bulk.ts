/**
 * What the benches on big tables share (bench/retention.ts, bench/event-queries.ts): progress on
 * stderr, the machine's description, a table filled in SQL with its indexes built after the rows as
 * a restore would, the SQL pieces of generated events, and the rewrite of a results page's
 * generated block.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';

/** Progress on stderr, stamped with the seconds since the call: stdout carries the report alone. */
export function progress(): (text: string) => void {
  const started = performance.now();
  return (text) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${text}\n`);
}

export async function rows<T extends pg.QueryResultRow>(client: pg.Client, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await client.query<T>(sql, params)).rows;
}

/** "<cpu>, <n> cores, <memory>; Node <v>; PostgreSQL <v> (autovacuum on|off)", for a report. */
export async function machine(adminUrl: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const [server] = await rows<{ version: string; autovacuum: string }>(
      admin,
      `select current_setting('server_version') as version, current_setting('autovacuum') as autovacuum`,
    );
    const cpus = os.cpus();
    return `${cpus[0]?.model.trim() ?? 'unknown'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; Node ${process.version}; PostgreSQL ${server!.version.split(' ')[0]} (autovacuum ${server!.autovacuum})`;
  } finally {
    await admin.end();
  }
}

export const loadAverage = (): number[] => os.loadavg().map((n) => Math.round(n * 100) / 100);

export interface FillResult {
  insertMs: number;
  indexMs: number;
  vacuumMs: number;
  /** The table with its indexes, after the fill. */
  bytes: number;
}

/**
 * Fills `table` as a restore would: the migrations' indexes and primary key dropped, `insert` run
 * with the foreign-key triggers skipped (its rows must reference existing rows by construction),
 * the same definitions built again, then VACUUM ANALYZE of the table and ANALYZE of the rest.
 */
export async function fillWithoutIndexes(client: pg.Client, table: string, insert: () => Promise<void>): Promise<FillResult> {
  const started = performance.now();
  const definitions = (
    await rows<{ indexdef: string }>(
      client,
      `select indexdef from pg_indexes where schemaname = 'public' and tablename = $1 and indexname <> $1 || '_pkey' order by indexname`,
      [table],
    )
  ).map((r) => r.indexdef);
  const [pkey] = await rows<{ def: string }>(
    client,
    `select pg_get_constraintdef(oid) as def from pg_constraint where conrelid = ('public.' || $1)::regclass and conname = $1 || '_pkey'`,
    [table],
  );
  for (const def of definitions) await client.query(`drop index ${/^CREATE INDEX (\S+) /.exec(def)![1]}`);
  if (pkey) await client.query(`alter table ${table} drop constraint ${table}_pkey`);
  await client.query('set session_replication_role = replica');
  await insert();
  await client.query('set session_replication_role = origin');
  const indexStarted = performance.now();
  await client.query(`set maintenance_work_mem = '1GB'`);
  if (pkey) await client.query(`alter table ${table} add constraint ${table}_pkey ${pkey.def}`);
  for (const def of definitions) await client.query(def);
  await client.query('reset maintenance_work_mem');
  const vacuumStarted = performance.now();
  await client.query(`vacuum analyze ${table}`);
  await client.query('analyze');
  const [size] = await rows<{ bytes: number }>(client, `select pg_total_relation_size($1)::float8 as bytes`, [table]);
  return {
    insertMs: indexStarted - started,
    indexMs: vacuumStarted - indexStarted,
    vacuumMs: performance.now() - vacuumStarted,
    bytes: size!.bytes,
  };
}

/**
 * The SQL of a UUID v7 for the epoch milliseconds `ms` (a bigint expression): its 48 bits of
 * milliseconds, then a v4 uuid from its 14th hex digit on (its random bits and variant), the
 * version digit in between set to 7.
 */
export const uuidV7Sql = (ms: string): string =>
  `(lpad(to_hex(${ms}), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14))::uuid`;

/** A CTE `tag_documents(docs)`: 1,000 tag documents as events carry them, `docs[1 + floor(random() * 1000)::int]` one at random. */
export const TAG_DOCUMENTS = `tag_documents as (
    select array_agg(jsonb_build_object(
             'plan', case when j % 50 = 0 then 'enterprise' when j % 10 = 0 then 'team' when j % 4 = 0 then 'pro' else 'free' end,
             'seats', 1 + (j * 7) % 40,
             'trial', j % 7 = 0,
             'country', (array['us', 'de', 'fr', 'gb', 'jp', 'br', 'in', 'ca'])[1 + j % 8]) order by j) as docs
      from generate_series(0, 999) as j
  )`;

/** The names generated events take, one in turn. */
export const EVENT_NAMES_SQL =
  "array['New signup', 'Payment succeeded', 'Page view', 'Deploy finished', 'Invoice paid', 'Error reported', 'Trial started']";

/**
 * Writes `block` between the `start` and `end` markers of `file`, keeping the rest of it (written by
 * hand); the block goes at the end when the markers are missing, and the file begins with `heading`
 * when it does not exist.
 */
export function writeGeneratedBlock(file: string, marks: { start: string; end: string }, block: string, heading: string): void {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : `${heading}\n`;
  const whole = `${marks.start}\n\n${block}\n\n${marks.end}`;
  const start = text.indexOf(marks.start);
  const end = text.indexOf(marks.end);
  writeFileSync(
    file,
    start >= 0 && end > start ? text.slice(0, start) + whole + text.slice(end + marks.end.length) : `${text.trimEnd()}\n\n${whole}\n`,
  );
}
