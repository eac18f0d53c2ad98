/**
 * The embedded database: PGlite in `<dataDir>/pg`, owned by this process and served to MikroORM's
 * ordinary pg driver in process. pg is handed a stream of ours in place of a socket (its `stream`
 * setting), so the database listens on nothing: no other process, of this user or another, can
 * reach it, and it has at most one connection at a time.
 */
import { access, statfs } from 'node:fs/promises';
import path from 'node:path';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { Duplex } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { PGlite } from '@electric-sql/pglite';
import type { Options } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.js';
import { closeDataDir, DataDirError, lockDataDir } from './lock.js';

/** Where MikroORM is pointed: pg takes the user and the database from it; the host is never looked up. */
export const EMBEDDED_URL = 'postgresql://postgres@pglite/postgres';

/**
 * The free space the data folder needs at start. PostgreSQL writes its log in 16 MiB segments, and
 * PGlite's backend stops for good when a new one does not fit (see `Backend`); a new database takes
 * about 40 MiB, and opening one again after such a stop needs room for a new segment as well.
 */
export const MIN_FREE_BYTES = 64 * 1024 * 1024;

/** The folder PGlite keeps the database in, inside the data folder. */
export const embeddedDatabaseDir = (dataDir: string) => path.join(dataDir, 'pg');

/**
 * Whether `dataDir` holds an embedded database already: PostgreSQL writes `PG_VERSION` into a
 * database folder when it makes one. Looks only and creates nothing (`openEmbedded` creates what is
 * missing). Only a file that is not there is "no": one this user may not reach (EACCES) counts as
 * there, for opening it to say what is wrong.
 */
export async function hasEmbeddedDatabase(dataDir: string): Promise<boolean> {
  return access(path.join(embeddedDatabaseDir(dataDir), 'PG_VERSION')).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== 'ENOENT' && err.code !== 'ENOTDIR',
  );
}

export interface EmbeddedDatabase {
  /** `options` with every connection pg makes going to this database, in process. */
  connectIn(options: Options): Options;
  /** Why the database has stopped answering for good, once it has: only a new process opens it again. */
  failed(): string | undefined;
  close(): Promise<void>;
}

/**
 * Opens the embedded database in `dataDir`: closes the folder to other users, takes its lock, checks
 * its free space, then opens PGlite. Each refusal says why (a `DataDirError`).
 */
export async function openEmbedded(dataDir: string, logger: Logger): Promise<EmbeddedDatabase> {
  await closeDataDir(dataDir);
  const release = await lockDataDir(dataDir);
  try {
    const free = await freeBytes(dataDir);
    if (free < MIN_FREE_BYTES) {
      throw new DataDirError(
        `the embedded database needs at least ${mib(MIN_FREE_BYTES)} MiB free to start, and the data folder ` +
          `${dataDir} has ${mib(free)} MiB: free some space on its disk, or set DATA_DIR to a folder on a larger one`,
      );
    }
    const dir = embeddedDatabaseDir(dataDir);
    // Loaded only here: a start on PostgreSQL never pays for PGlite's modules.
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = await (async () => {
      if (!(await hasEmbeddedDatabase(dataDir))) await createCluster(dir);
      return PGlite.create(dir);
    })().catch(async (err: Error) => {
      throw new Error(`PGlite could not open ${dir} (${mib(await freeBytes(dataDir))} MiB free): ${err.message}`, {
        cause: err,
      });
    });
    const backend = new Backend(pglite, logger);
    return {
      connectIn: (options) => {
        const { connection, ...driverOptions } = (options.driverOptions ?? {}) as { connection?: object };
        // ssl: false whatever PGSSLMODE says: nothing leaves the process.
        const inProcess = { ...connection, ssl: false, stream: () => new Connection(backend) };
        return { ...options, driverOptions: { ...driverOptions, connection: inProcess } };
      },
      failed: () => backend.failure,
      close: async () => {
        await backend.idle();
        // A backend that ended cannot shut down (its next step would spin for ever); its files stay as a
        // crash leaves them, and PGlite recovers them at the next start.
        if (backend.failure === undefined) await pglite.close();
        await release();
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}

/**
 * Makes a new database in `dir` in a worker thread that ends when it is made. PGlite's initdb grows
 * WebAssembly memories of about 500 MiB that the process would hold until a full garbage collection
 * that may never come (the heap stays small); a worker's memory goes when it ends. Opening the new
 * database again then costs under half a second, and a first start rests near the memory of later
 * ones. The worker is evaluated code, whose `require` would resolve from the working folder: it is
 * handed PGlite's module resolved from here.
 */
async function createCluster(dir: string): Promise<void> {
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     const { PGlite } = require(workerData.pglite);
     PGlite.create(workerData.dir).then((db) => db.close());`,
    { eval: true, workerData: { pglite: createRequire(import.meta.url).resolve('@electric-sql/pglite'), dir } },
  );
  const [code] = (await once(worker, 'exit')) as [number];
  if (code !== 0) throw new Error(`creating the database ended with exit code ${code}`);
}

async function freeBytes(dir: string): Promise<number> {
  const { bavail, bsize } = await statfs(dir);
  return bavail * bsize;
}

const mib = (bytes: number) => Math.floor(bytes / (1024 * 1024));

/** Protocol message types, by their first byte. */
const QUERY = 0x51; // 'Q'
const SYNC = 0x53; // 'S'
const ERROR = 0x45; // 'E' from the backend
const READY = 0x5a; // 'Z'
const COPY_IN = 0x47; // 'G'

/**
 * PGlite's single backend and the one connection at a time it serves. Messages go to it one by one,
 * in order, and each answer is checked: once the backend reports that it ended (a FATAL or PANIC
 * error, a Query or Sync left without ReadyForQuery, or PGlite throwing), nothing more is sent to it.
 * That is what happens when a new 16 MiB log segment does not fit on the disk: PostgreSQL PANICs,
 * PGlite returns the error but keeps the process, and its next message spins in WebAssembly for
 * ever, blocking the event loop. Refused from then on, every request fails at once (503) and
 * `/healthz` answers 503, so a supervisor restarts the process.
 */
class Backend {
  failure: string | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #holder: Connection | undefined;

  constructor(
    private readonly pglite: PGlite,
    private readonly logger: Logger,
  ) {}

  /** Resolves once everything asked of the backend so far is done. */
  idle(): Promise<void> {
    return this.#serial(async () => undefined);
  }

  /**
   * Sends `message` (the first of its connection when `startup`) and resolves with the answer, and
   * whether the connection is over: refused, or its backend ended.
   */
  exchange(connection: Connection, message: Buffer, startup: boolean): Promise<{ answer: Buffer; over: boolean }> {
    return this.#serial(async () => {
      if (this.failure !== undefined) {
        return { answer: startup ? fatal('57P03', `the embedded database has stopped: ${this.failure}`) : Buffer.alloc(0), over: true };
      }
      if (startup) {
        // PGlite runs one session: a second connection would share it, and its queries could wait for
        // ever behind the first one's open transaction.
        if (this.#holder !== undefined) {
          return { answer: fatal('53300', 'the embedded database takes one connection at a time'), over: true };
        }
        this.#holder = connection;
      } else if (this.#holder !== connection) {
        // Refused, or released: nothing of it reaches the session another connection may hold now.
        return { answer: Buffer.alloc(0), over: true };
      }
      const chunks: Buffer[] = [];
      let ended: string | undefined;
      try {
        // Copied: PGlite hands out views of a buffer it reuses.
        const onRawData = (data: Uint8Array) => chunks.push(Buffer.from(data));
        await this.pglite.runExclusive(() => this.pglite.execProtocolRawStream(message, { onRawData }));
      } catch (err) {
        ended = `PGlite failed: ${(err as Error).message}`;
      }
      const answer = Buffer.concat(chunks);
      ended ??= backendEnded(message, startup, answer);
      if (ended !== undefined) {
        this.failure = ended;
        this.logger.fatal({ reason: ended }, 'the embedded database has stopped; it answers nothing more until the service restarts');
      }
      return { answer, over: ended !== undefined };
    });
  }

  /**
   * `connection` is gone. Its session is PGlite's only one, which the next connection takes over: a
   * transaction left open is rolled back first, as PostgreSQL does when a connection ends.
   */
  release(connection: Connection): void {
    if (this.#holder !== connection) return;
    this.#holder = undefined;
    void this.#serial(async () => {
      if (this.failure === undefined && this.pglite.isInTransaction()) await this.pglite.exec('rollback');
    }).catch((err: unknown) => this.logger.error({ err }, 'embedded database: rolling back a closed connection failed'));
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work);
    this.#queue = run.catch(() => undefined);
    return run;
  }
}

/**
 * Why the backend's `answer` to `message` shows that it ended, if it does. PostgreSQL answers a
 * startup, a Query and a Sync up to ReadyForQuery (or, for COPY FROM STDIN, up to CopyInResponse),
 * unless its backend ends; and a FATAL or PANIC error ends it.
 */
function backendEnded(message: Buffer, startup: boolean, answer: Buffer): string | undefined {
  let ready = false;
  for (let at = 0; at + 5 <= answer.length; at += 1 + answer.readInt32BE(at + 1)) {
    const type = answer[at];
    if (type === READY || type === COPY_IN) ready = true;
    if (type === ERROR) {
      const fields = errorFields(answer.subarray(at + 5, at + 1 + answer.readInt32BE(at + 1)));
      const severity = fields.get('V') ?? fields.get('S');
      if (severity === 'FATAL' || severity === 'PANIC') return `${severity} ${fields.get('C')}: ${fields.get('M')}`;
    }
  }
  if (!ready && (startup || message[0] === QUERY || message[0] === SYNC)) return 'its answer ended without ReadyForQuery';
  return undefined;
}

/** An ErrorResponse's fields: a type byte, then a NUL-terminated value, each; a NUL ends the list. */
function errorFields(body: Buffer): Map<string, string> {
  const fields = new Map<string, string>();
  for (let at = 0; at < body.length && body[at] !== 0;) {
    const end = body.indexOf(0, at + 1);
    if (end === -1) break;
    fields.set(String.fromCharCode(body[at]!), body.toString('utf8', at + 1, end));
    at = end + 1;
  }
  return fields;
}

/** A FATAL ErrorResponse, as PostgreSQL refuses a connection. */
function fatal(code: string, text: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${text}\0\0`);
  const head = Buffer.alloc(5);
  head[0] = ERROR;
  head.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/**
 * What pg takes for its socket: the bytes pg writes are cut into protocol messages and handed to
 * the backend, and its answers are what pg reads. Ended by pg (end or destroy), or by the backend
 * when it refuses the connection or stops.
 */
class Connection extends Duplex {
  #pending: Buffer = Buffer.alloc(0);
  #started = false;

  constructor(private readonly backend: Backend) {
    super();
  }

  // The parts of net.Socket pg calls.
  connect(): this {
    process.nextTick(() => this.emit('connect'));
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    this.#deliver().then(() => done(), done);
  }

  /** pg is done writing: nothing more will be answered. */
  override _final(done: (error?: Error | null) => void): void {
    this.push(null);
    done();
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.backend.release(this);
    done(error);
  }

  /** Sends each complete message buffered, in order, and hands pg the answers. */
  async #deliver(): Promise<void> {
    for (;;) {
      // The startup message has no type byte: its length comes first.
      const header = this.#started ? 5 : 4;
      if (this.#pending.length < header) return;
      const length = this.#started ? 1 + this.#pending.readInt32BE(1) : this.#pending.readInt32BE(0);
      if (this.#pending.length < length) return;
      const message = this.#pending.subarray(0, length);
      this.#pending = this.#pending.subarray(length);
      const startup = !this.#started;
      this.#started = true;
      const { answer, over } = await this.backend.exchange(this, message, startup);
      if (this.destroyed) return;
      if (answer.length > 0) this.push(answer);
      if (over) {
        this.destroy();
        return;
      }
    }
  }
}
