/**
 * The one module that knows the insides of MikroORM and knex: it runs hand-written statements on
 * the connection MikroORM would use, maps their rows, and hands the rest of db/ what it needs of
 * knex (how busy the pool is, the store rate-limiter-flexible keeps its counters in, the pool's
 * connection settings). The repositories' hand-written statements (db/repositories/) are built on it;
 * nothing outside server/src/db/ speaks SQL.
 *
 * Statements run straight on a pg connection of MikroORM's pool: the request's transaction's
 * connection when one is open, else one taken from the pool for this statement alone. They go as
 * unnamed statements, parsed and planned at each run, which any pooler passes on. With
 * `DATABASE_PREPARED=true` they go on PostgreSQL as named prepared statements instead: each server
 * session parses and plans a statement once and then only binds and executes it (for the project
 * read, planning takes longer than running), which needs prepared statements kept per client (no
 * pooler in transaction mode before PgBouncer 1.21's `max_prepared_statements`). The embedded
 * database always gets unnamed statements: PGlite is a single session that outlives a reconnecting
 * client, which would then prepare a name that already exists.
 *
 * Why by hand at all: MikroORM spends about 1–3 ms of CPU building, compiling and hydrating each
 * `find`, several times the cost of the statement itself, so the statements every request runs
 * (the credential, the project with the caller's role, a project's contents, an activity page) are
 * written out. Rows the request may change (the caller, the project) become the same managed
 * entity `find` would have made, merged into the identity map (`mapRow`) when first used; rows an
 * answer only shows stay plain values (`plainRow`). Column lists come from the entity metadata, so
 * a column added to an entity is selected here too.
 *
 * Invariants: a statement's SQL text is a constant or built once (`sqlOnce`), so the prepared
 * statements per connection stay few; a statement's SQL never contains `?` except as a parameter.
 */
import { wrap, type EntityManager, type EntityName, type Knex, type MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';

interface PgConnection {
  query<T>(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: T[] }>;
}

/** knex's client: the pool's, or a transaction's, whose `acquireConnection` answers the transaction's connection. */
interface ConnectionSource {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): unknown;
}

const prepared = new WeakSet<object>();

function knexOf(orm: MikroORM): Knex {
  return orm.em.getConnection().getKnex();
}

/** Statements of this ORM's connections are prepared once per connection (PostgreSQL with `DATABASE_PREPARED` only). */
export function usePreparedStatements(orm: MikroORM): void {
  prepared.add(knexOf(orm));
}

interface Statement {
  name: string;
  text: string;
}

const statements = new Map<string, Statement>();

/** `?` placeholders become `$1…`, once per distinct SQL text, which also names the prepared statement. */
function statement(sql: string): Statement {
  let found = statements.get(sql);
  if (!found) {
    let n = 0;
    found = { name: `sb_${statements.size + 1}`, text: sql.replace(/\?/g, () => `$${++n}`) };
    statements.set(sql, found);
  }
  return found;
}

/**
 * Runs `sql` with `params`: `?` marks a parameter (so the SQL itself must not contain a `?`), and an
 * array is one parameter, e.g. `?::uuid[]`.
 *
 * `planEachTime` sends it unprepared, so PostgreSQL plans it for the table as it is at each run. It
 * is for a statement on a table whose size swings, such as the webhook deliveries' queue. That table
 * is empty at start and thousands of rows deep under load. A prepared statement soon settles on one
 * generic plan, and keeps it until the table's statistics change. Autovacuum may be off, and then
 * they change only when the service vacuums. A plan made for an empty table scans the whole table.
 */
export async function query<T = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: unknown[],
  options?: { planEachTime: true },
): Promise<T[]> {
  const knex = em.getConnection().getKnex();
  const source = (em.getTransactionContext<{ client: ConnectionSource }>() ?? knex).client as ConnectionSource;
  const { name, text } = statement(sql);
  const connection = await source.acquireConnection();
  try {
    const named = prepared.has(knex) && !options?.planEachTime;
    return (await connection.query<T>({ name: named ? name : undefined, text, values: params })).rows;
  } finally {
    source.releaseConnection(connection);
  }
}

const columnLists = new Map<string, string[]>();

/** The entity's own columns (no collections), as database field names. */
function columns<T extends object>(em: EntityManager, entity: EntityName<T>): string[] {
  const meta = em.getMetadata(entity);
  let list = columnLists.get(meta.className);
  if (!list) {
    list = meta.props.filter((prop) => prop.persist !== false && prop.fieldNames?.length).flatMap((prop) => prop.fieldNames);
    columnLists.set(meta.className, list);
  }
  return list;
}

const selectLists = new Map<string, string>();

/** `alias."col" as "prefix__col", …` for every column of `entity`, built once per entity, alias and prefix (hot path). */
export function selectColumns<T extends object>(em: EntityManager, entity: EntityName<T>, alias: string, prefix: string): string {
  const key = `${em.getMetadata(entity).className}\u0000${alias}\u0000${prefix}`;
  let list = selectLists.get(key);
  if (list === undefined) {
    list = columns(em, entity)
      .map((column) => `${alias}."${column}" as "${prefix}__${column}"`)
      .join(', ');
    selectLists.set(key, list);
  }
  return list;
}

/** The columns of `row` selected with `prefix`, by their own names: the raw data `em.map` takes. */
function columnsOfPrefix<T extends object>(
  em: EntityManager,
  entity: EntityName<T>,
  row: Record<string, unknown>,
  prefix: string,
): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const column of columns(em, entity)) data[column] = row[`${prefix}__${column}`];
  return data;
}

/**
 * The managed entity for the `prefix`-ed columns of `row`: what `em.map` does, without cascading
 * the merge over relations or re-validating what the database just returned (a quarter cheaper).
 * An entity the request already holds, loaded, wins over the row, so that mapping late (a caller's
 * account is mapped on first use, credentials.ts) never overwrites a change not yet flushed; a
 * reference the request holds (another entity's relation to it) is filled in from the row.
 */
export function mapRow<T extends object>(em: EntityManager, entity: EntityName<T>, row: Record<string, unknown>, prefix: string): T {
  const meta = em.getMetadata(entity);
  const held = em.getUnitOfWork().getById<T>(meta.className, row[`${prefix}__id`] as never);
  if (held && wrap(held).isInitialized()) return held;
  const data = em.getDriver().mapResult(columnsOfPrefix(em, entity, row, prefix) as never, meta);
  return em.merge(entity, data as never, { convertCustomTypes: true, refresh: true, cascade: false, validate: false });
}

const plainProps = new Map<string, { prop: string; column: string; date: boolean }[]>();

/**
 * The `prefix`-ed columns of `row` as a plain object of the entity's properties, timestamps parsed:
 * for a row an answer only shows, where a managed entity would cost more than the statement.
 */
export function plainRow<T extends object>(
  em: EntityManager,
  entity: EntityName<T>,
  row: Record<string, unknown>,
  prefix: string,
): Record<string, unknown> {
  const meta = em.getMetadata(entity);
  let props = plainProps.get(meta.className);
  if (!props) {
    props = meta.props
      .filter((prop) => prop.persist !== false && prop.fieldNames?.length === 1 && !prop.targetMeta)
      .map((prop) => ({ prop: prop.name, column: prop.fieldNames[0]!, date: prop.runtimeType === 'Date' }));
    plainProps.set(meta.className, props);
  }
  const plain: Record<string, unknown> = {};
  for (const { prop, column, date } of props) {
    const value = row[`${prefix}__${column}`];
    plain[prop] = date && typeof value === 'string' ? new Date(value) : value;
  }
  return plain;
}

const texts = new Map<string, string>();

/**
 * A hot statement's SQL, built once by `build` (column lists need the ORM's metadata, so not at
 * import) and then the very same string each time: V8 keeps a string's hash with the string, so
 * `query`'s lookup of its statement does not hash the text again.
 */
export function sqlOnce(key: string, build: () => string): string {
  let text = texts.get(key);
  if (text === undefined) {
    text = build();
    texts.set(key, text);
  }
  return text;
}

interface KnexPool {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

/** The pool's connections by state; `pending` counts the acquires waiting for one. */
export interface PoolUse {
  used: number;
  free: number;
  pending: number;
}

/** How busy the pool is, or undefined while it does not exist (before the first connection, after closing). */
export function poolUse(orm: MikroORM): PoolUse | undefined {
  const pool = (knexOf(orm).client as { pool?: KnexPool }).pool;
  return pool && { used: pool.numUsed(), free: pool.numFree(), pending: pool.numPendingAcquires() };
}

/**
 * The options that put rate-limiter-flexible's PostgreSQL store on the service's own pool, so the
 * counters share its connections and its bounds.
 */
export function rateLimitStore(orm: MikroORM): { storeClient: unknown; storeType: 'knex' } {
  return { storeClient: knexOf(orm), storeType: 'knex' };
}

/** Runs `work` in a knex transaction on `connection`, a client opened beside the pool; MikroORM's migrator takes that transaction. */
export function transactionOn<T>(orm: MikroORM, connection: pg.Client, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return knexOf(orm).transaction(work, { connection });
}
