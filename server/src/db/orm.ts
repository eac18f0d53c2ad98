import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MikroORM, type EntityManager, type Knex, type Options } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { entities } from './entities.js';
import { EMBEDDED_URL, openEmbedded } from './embedded.js';
import { transactionOn, usePreparedStatements } from './raw.js';

export type { MikroORM };

export interface Database {
  orm: MikroORM;
  kind: 'postgresql' | 'embedded';
  description: string;
  /**
   * The settings of a session of its own on the database itself (`DATABASE_DIRECT_URL`), for what needs
   * one server session throughout (the migrations' lock); undefined for the embedded database.
   */
  directSession: pg.ClientConfig | undefined;
  /** Why the database has stopped for good, once it has (the embedded one only): a restart of the process is needed. */
  failed(): string | undefined;
  close(): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * A unit of work of its own (MikroORM's fork of the global entity manager): one per request, per
 * background run or per operator command, so that no two share an identity map or a transaction.
 */
export function unitOfWork(orm: MikroORM): EntityManager {
  return orm.em.fork();
}

const databaseKeys = new WeakMap<object, string>();
let databaseCount = 0;

/**
 * A name for the database `em` works on, the same for every fork of one ORM: it keeps apart what a
 * module holds per database (the groups of writes of domain/group-commit.ts) when one process runs
 * several servers, as the tests do.
 */
export function databaseKey(em: EntityManager): string {
  let key = databaseKeys.get(em.config);
  if (key === undefined) databaseKeys.set(em.config, (key = `db${++databaseCount}`));
  return key;
}

/** What bounds a connection's connecting and each of its statements. */
export type ConnectionBounds = Pick<Config['database'], 'connectTimeoutMs' | 'statementTimeoutMs'>;

/**
 * How much longer than the server's `statement_timeout` the client waits for an answer. Past the
 * server's own bound only a server that does not answer at all (stalled, or cut off by the network)
 * keeps a query waiting: the client then gives up (pg's "Query read timeout").
 */
const QUERY_TIMEOUT_MARGIN_MS = 1_000;

/**
 * The pg client settings of every connection to `databaseUrl`: bounded connecting, TCP keepalive,
 * the server's `statement_timeout` as the session's default, and the client-side bound on each query.
 *
 * The default goes in `options` (`-c statement_timeout=…`), not as a startup parameter of its own:
 * PgBouncer refuses a connection with a startup parameter it does not know, and is usually set to
 * ignore `options`. Through such a pooler the default is then the role's (`checkStatementBound`), and
 * transactions set their own bound (`boundTransactions`).
 */
export function pgConnectionOptions(databaseUrl: string, bounds: ConnectionBounds): pg.ClientConfig {
  return {
    // MikroORM reads only host, port, user, password and database from clientUrl; handing pg the
    // whole URL keeps the rest (sslmode, a socket directory in ?host=) instead of dropping it.
    connectionString: databaseUrl,
    connectionTimeoutMillis: bounds.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    options: `-c statement_timeout=${bounds.statementTimeoutMs}`,
    query_timeout: bounds.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
  };
}

function ormOptions(clientUrl: string, logger: Logger, bounds: Config['database'], pool: Options['pool']): Options {
  return {
    clientUrl,
    entities,
    // Migrations are found relative to this file, never to the working directory.
    baseDir: here,
    migrations: { path: './migrations', pathTs: './migrations', silent: true, snapshot: false },
    // The schema comes from the migrations alone; the database itself must already exist.
    ensureDatabase: false,
    // Ids and timestamps are set by em.create, so a new entity's id is known before the flush.
    processOnCreateHooksEarly: true,
    debug: false,
    colors: false,
    logger: (message) => logger.debug({ orm: message }, 'mikro-orm'),
    driverOptions: {
      connection: pgConnectionOptions(clientUrl, bounds),
      // knex's own warnings (a pooled connection found broken) go to the service's log, not to stdout.
      log: {
        warn: (message: unknown) => logger.warn({ knex: String(message) }, 'knex'),
        error: (message: unknown) => logger.error({ knex: String(message) }, 'knex'),
        deprecate: (message: unknown) => logger.debug({ knex: String(message) }, 'knex'),
        debug: (message: unknown) => logger.debug({ knex: String(message) }, 'knex'),
      },
    },
    pool: {
      ...pool,
      // Past this, a request waiting for a connection gets 503 rather than queueing behind a stalled database.
      acquireTimeoutMillis: bounds.acquireTimeoutMs,
      // Nothing is set on the session here: through a pooler in transaction mode it would land on
      // whichever server session ran it, and the connection's next transaction may run on another.
      afterCreate: (conn: PgClient, done: (err: Error | null, conn: PgClient) => void) => {
        wrapQueries(conn, bounds.statementTimeoutMs);
        done(null, conn);
      },
    },
  };
}

interface PgClient {
  query(...args: unknown[]): unknown;
  end(): Promise<void>;
}

/**
 * Every query of a pool connection goes through here, knex's and raw.ts's:
 * - A transaction's BEGIN carries `set local statement_timeout` (`boundTransactions`).
 * - A query the client gave up on (`query_timeout`) leaves its connection waiting on a server that
 *   may never answer, and pg would send the next query down it. The client is ended instead: with a
 *   query outstanding pg destroys the socket at once, knex marks the connection disposed on its
 *   'end', and the pool replaces it at the next acquire.
 */
function wrapQueries(conn: PgClient, statementTimeoutMs: number): void {
  // The client class's own method, looked up at each call rather than kept: whatever wraps the class
  // (the tests count statements there) still sees every query.
  const proto = Object.getPrototypeOf(conn) as PgClient;
  const setLocal = ` set local statement_timeout = ${statementTimeoutMs};`;
  const check = (err: unknown) => {
    if (err instanceof Error && err.message === 'Query read timeout') conn.end().catch(() => undefined);
  };
  conn.query = function (this: PgClient, ...args: unknown[]) {
    args[0] = boundTransactions(args[0], setLocal);
    const callback = args.at(-1);
    if (typeof callback === 'function') {
      args[args.length - 1] = (err: unknown, result: unknown) => {
        check(err);
        (callback as (err: unknown, result: unknown) => void)(err, result);
      };
    }
    const result = proto.query.apply(this, args);
    if (result instanceof Promise) result.catch(check);
    return result;
  };
}

const BEGIN = /^\s*begin\b[^;]*;?\s*$/i;

/**
 * `query`, a pg query config, with `setLocal` after it when it begins a transaction: knex sends
 * `BEGIN;` (or `BEGIN TRANSACTION <mode>;`) as a text without values, which pg sends as one simple
 * query, so the bound costs no round trip of its own. A savepoint inherits its transaction's bound.
 */
function boundTransactions(query: unknown, setLocal: string): unknown {
  if (typeof query === 'string') return BEGIN.test(query) ? `${query.replace(/;?\s*$/, ';')}${setLocal}` : query;
  if (typeof query !== 'object' || query === null || Object.getPrototypeOf(query) !== Object.prototype) return query;
  const { text, values } = query as { text?: unknown; values?: unknown[] };
  if (typeof text !== 'string' || !BEGIN.test(text) || (values?.length ?? 0) > 0) return query;
  return { ...query, text: `${text.replace(/;?\s*$/, ';')}${setLocal}` };
}

const MIGRATIONS_DIR = path.join(here, 'migrations');
/** A migration file of this build, compiled or not; MikroORM records it under the name without extension. */
const MIGRATION_FILE = /^(Migration\d+_\w+)\.(?:ts|js)$/;

/** The session advisory lock instances migrate under: 'Signalbd' in ASCII, a key nothing else takes. */
const MIGRATIONS_LOCK = '6010448901481194084';

/**
 * Applies pending migrations and returns their names, in order. MikroORM's migrator (and the
 * ~0.15 s of modules it loads) is brought in only when the database has not recorded every
 * migration this build carries; a usual start sees that in one query.
 *
 * Instances of a new release may start at once on one PostgreSQL database: they migrate one at a
 * time, each under the lock (on the direct session, never through a pooler) and checking again once
 * it holds it, so the first applies what is pending and the others find it recorded. The embedded
 * database has a single owner process, and no direct session.
 */
export async function applyMigrations(db: Pick<Database, 'orm' | 'directSession'>): Promise<string[]> {
  const bundled = (await readdir(MIGRATIONS_DIR)).flatMap((file) => MIGRATION_FILE.exec(file)?.[1] ?? []);
  // A wrong migrations path does not fail in MikroORM: it finds nothing and applies nothing.
  if (bundled.length === 0) throw new Error(`no migrations found in ${MIGRATIONS_DIR}`);
  if (await allRecorded(db.orm, bundled)) return [];
  const { Migrator } = await import('@mikro-orm/migrations');
  Migrator.register(db.orm);
  if (!db.directSession) return (await db.orm.getMigrator().up()).map((m) => m.name);
  return underMigrationsLock(db.orm, db.directSession, async (trx) => {
    if (await allRecorded(db.orm, bundled, trx)) return [];
    return (await db.orm.getMigrator().up({ transaction: trx })).map((m) => m.name);
  });
}

/**
 * Runs `work` in a transaction on a connection of its own to the database itself (`direct`), which
 * holds the migrations lock for the whole of it; ending that session releases the lock, however
 * `work` ends. The connection has no client-side query bound: the lock is waited for as long as
 * another instance migrates, and a migration may lift `statement_timeout` for itself (`set local`).
 */
async function underMigrationsLock<T>(orm: MikroORM, direct: pg.ClientConfig, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const { query_timeout: _clientBound, ...settings } = direct;
  const client = new pg.Client(settings);
  // A lost connection fails the statement under way; unlistened, its 'error' event would end the process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(`begin; set local statement_timeout = 0; select pg_advisory_lock(${MIGRATIONS_LOCK}); commit`);
    return await transactionOn(orm, client, work);
  } finally {
    await client.end();
  }
}

async function allRecorded(orm: MikroORM, names: string[], trx?: Knex.Transaction): Promise<boolean> {
  const connection = orm.em.getConnection();
  const [table] = await connection.execute<{ exists: string | null }[]>(
    `select to_regclass('mikro_orm_migrations') as exists`,
    [],
    'all',
    trx,
  );
  if (!table?.exists) return false;
  const recorded = await connection.execute<{ name: string }[]>('select name from mikro_orm_migrations', [], 'all', trx);
  const done = new Set(recorded.map((row) => row.name));
  return names.every((name) => done.has(name));
}

/**
 * Refuses a database on which a statement outside a transaction would not be bounded by
 * `statementTimeoutMs`. Such a statement has only its session's default: on PostgreSQL itself the
 * one `pgConnectionOptions` sets; through a pooler, which drops that setting, the server's default
 * for the role and database (`ALTER ROLE … SET statement_timeout`), the same for every server
 * session the pooler opens. A lower default is a tighter bound, and accepted.
 */
async function checkStatementBound(orm: MikroORM, statementTimeoutMs: number): Promise<void> {
  const [row] = await orm.em
    .getConnection()
    .execute<{ ms: number; role: string }[]>(
      `select setting::int as ms, current_user as role from pg_settings where name = 'statement_timeout'`,
    );
  const ms = row?.ms ?? 0;
  if (ms > 0 && ms <= statementTimeoutMs) return;
  const role = row?.role ?? 'the role';
  throw new Error(
    `statements outside a transaction would run ${ms === 0 ? 'without a time bound' : `for up to ${ms} ms`}, not within ` +
      `DB_STATEMENT_TIMEOUT_MS (${statementTimeoutMs} ms): DATABASE_URL's sessions start with that statement_timeout ` +
      `(a pooler drops the setting the service connects with). Set it for the service's role, at most ` +
      `DB_STATEMENT_TIMEOUT_MS: ALTER ROLE "${role}" SET statement_timeout = ${statementTimeoutMs}`,
  );
}

async function serverVersion(orm: MikroORM): Promise<string> {
  const [row] = await orm.em.getConnection().execute<{ server_version: string }[]>('show server_version');
  return row?.server_version.split(' ')[0] ?? 'unknown';
}

/** Where a PostgreSQL URL points, without its user or password. */
function describeUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  const host = url.searchParams.get('host') || url.hostname || 'localhost';
  return `${host}:${url.port || 5432}${decodeURIComponent(url.pathname)}`;
}

/**
 * Opens the database: PostgreSQL at `config.databaseUrl`, or else PGlite in `config.dataDir`, owned
 * by this process and served to MikroORM's ordinary pg driver in process (db/embedded.ts).
 */
export async function openDatabase(config: Config, logger: Logger, opts: { migrate?: boolean } = {}): Promise<Database> {
  const started = Date.now();
  const cleanups: (() => Promise<unknown>)[] = [];
  const close = once(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  try {
    let orm: MikroORM;
    let kind: Database['kind'];
    let description: string;
    let failed: Database['failed'] = () => undefined;
    let boundStatements = () => {};
    let directSession: pg.ClientConfig | undefined;
    if (config.databaseUrl) {
      kind = 'postgresql';
      orm = await MikroORM.init(ormOptions(config.databaseUrl, logger, config.database, undefined));
      cleanups.push(() => orm.close());
      if (config.database.preparedStatements) usePreparedStatements(orm);
      await checkStatementBound(orm, config.database.statementTimeoutMs);
      directSession = pgConnectionOptions(config.databaseDirectUrl ?? config.databaseUrl, config.database);
      description = `PostgreSQL ${await serverVersion(orm)} at ${describeUrl(config.databaseUrl)}`;
    } else {
      kind = 'embedded';
      const embedded = await openEmbedded(config.dataDir, logger);
      cleanups.push(() => embedded.close());
      failed = embedded.failed;
      boundStatements = () => embedded.boundStatements(config.database.statementTimeoutMs);
      // PGlite serves one connection at a time: a pool of one.
      orm = await MikroORM.init(embedded.connectIn(ormOptions(EMBEDDED_URL, logger, config.database, { min: 1, max: 1 })));
      cleanups.push(() => orm.close());
      description = `embedded PGlite (PostgreSQL ${await serverVersion(orm)}) in ${config.dataDir}`;
    }
    if (opts.migrate ?? true) {
      const migrating = Date.now();
      const applied = await applyMigrations({ orm, directSession });
      if (applied.length > 0) logger.info({ migrations: applied, ms: Date.now() - migrating }, 'migrations applied');
    }
    // A migration may run long on a large database; every statement after it is bounded.
    boundStatements();
    logger.info({ kind, description, ms: Date.now() - started }, 'database ready');
    return { orm, kind, description, directSession, close, failed };
  } catch (err) {
    await close().catch((closeErr: unknown) => logger.warn({ err: closeErr }, 'database cleanup failed'));
    throw err;
  }
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}
