import { mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MikroORM, type Options } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { entities } from './entities.js';
import { lockDataDir } from './lock.js';
import { usePreparedStatements } from './sql.js';

export type { MikroORM };

export interface Database {
  orm: MikroORM;
  kind: 'postgresql' | 'embedded';
  description: string;
  close(): Promise<void>;
}

// Applies to migrations too: one that may run longer (an index on a big table) starts with
// `set local statement_timeout = 0`. PGlite accepts the setting but cannot enforce it (no timers).
const STATEMENT_TIMEOUT_MS = 15_000;
const here = path.dirname(fileURLToPath(import.meta.url));

function ormOptions(clientUrl: string, logger: Logger, pool: Options['pool']): Options {
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
    // MikroORM reads only host, port, user, password and database from clientUrl; handing pg the
    // whole URL keeps the rest (sslmode, a socket directory in ?host=) instead of dropping it.
    driverOptions: { connection: { connectionString: clientUrl } },
    pool: {
      ...pool,
      // No query may hang forever, whatever it waits for (a lock, a runaway plan).
      afterCreate: (conn: PgClient, done: (err: Error | null, conn: PgClient) => void) => {
        conn.query(`set statement_timeout = ${STATEMENT_TIMEOUT_MS}`, (err) => done(err, conn));
      },
    },
  };
}

interface PgClient {
  query(sql: string, callback: (err: Error | null) => void): void;
}

const MIGRATIONS_DIR = path.join(here, 'migrations');
/** A migration file of this build, compiled or not; MikroORM records it under the name without extension. */
const MIGRATION_FILE = /^(Migration\d+_\w+)\.(?:ts|js)$/;

/**
 * Applies pending migrations and returns their names, in order. MikroORM's migrator (and the
 * ~0.15 s of modules it loads) is brought in only when the database has not recorded every
 * migration this build carries; a usual start sees that in one query.
 */
export async function applyMigrations(orm: MikroORM): Promise<string[]> {
  const bundled = (await readdir(MIGRATIONS_DIR)).flatMap((file) => MIGRATION_FILE.exec(file)?.[1] ?? []);
  // A wrong migrations path does not fail in MikroORM: it finds nothing and applies nothing.
  if (bundled.length === 0) throw new Error(`no migrations found in ${MIGRATIONS_DIR}`);
  if (await allRecorded(orm, bundled)) return [];
  const { Migrator } = await import('@mikro-orm/migrations');
  Migrator.register(orm);
  return (await orm.getMigrator().up()).map((m) => m.name);
}

async function allRecorded(orm: MikroORM, names: string[]): Promise<boolean> {
  const connection = orm.em.getConnection();
  const [table] = await connection.execute<{ exists: string | null }[]>(`select to_regclass('mikro_orm_migrations') as exists`);
  if (!table?.exists) return false;
  const recorded = await connection.execute<{ name: string }[]>('select name from mikro_orm_migrations');
  const done = new Set(recorded.map((row) => row.name));
  return names.every((name) => done.has(name));
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
 * by this process and served to MikroORM's ordinary pg driver over a loopback socket.
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
    if (config.databaseUrl) {
      kind = 'postgresql';
      orm = await MikroORM.init(ormOptions(config.databaseUrl, logger, undefined));
      cleanups.push(() => orm.close());
      usePreparedStatements(orm);
      description = `PostgreSQL ${await serverVersion(orm)} at ${describeUrl(config.databaseUrl)}`;
    } else {
      kind = 'embedded';
      await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
      cleanups.push(await lockDataDir(config.dataDir));
      // Loaded only here: a start on PostgreSQL never pays for PGlite's modules.
      const [{ PGlite }, { PGLiteSocketServer }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-socket')]);
      const pglite = await PGlite.create(path.join(config.dataDir, 'pg'));
      cleanups.push(() => pglite.close());
      // PGlite runs one query at a time: one socket connection and a pool of one, or a second
      // connection's query can wait forever behind an open transaction.
      const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 1 });
      await server.start();
      cleanups.push(() => server.stop());
      orm = await MikroORM.init(ormOptions(`postgresql://postgres@${server.getServerConn()}/postgres`, logger, { min: 1, max: 1 }));
      cleanups.push(() => orm.close());
      description = `embedded PGlite (PostgreSQL ${await serverVersion(orm)}) in ${config.dataDir}`;
    }
    if (opts.migrate ?? true) {
      const applied = await applyMigrations(orm);
      if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');
    }
    logger.info({ kind, description, ms: Date.now() - started }, 'database ready');
    return { orm, kind, description, close };
  } catch (err) {
    await close().catch((closeErr: unknown) => logger.warn({ err: closeErr }, 'database cleanup failed'));
    throw err;
  }
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}
