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
import type { Options } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.js';
import { startModuleWorker } from '../worker-thread.js';
import type { EngineReply, EngineRequest, EngineSettings } from './embedded-engine.js';
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
  /** From now on, a statement running longer than `ms` is ended (see `Backend`). */
  boundStatements(ms: number): void;
  close(): Promise<void>;
}

/**
 * The temporary files one statement may write (sorts and hashes that do not fit in memory), in kB.
 * The service's own statements stay far below it; one that would pass it fails (a 503) instead of
 * filling the disk the database lives on.
 */
export const TEMP_FILE_LIMIT_KB = 256 * 1024;

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
    const settings: EngineSettings = { dir: embeddedDatabaseDir(dataDir), tempFileLimitKb: TEMP_FILE_LIMIT_KB };
    const engine = await (async () => {
      if (!(await hasEmbeddedDatabase(dataDir))) await createCluster(settings.dir);
      return EngineThread.open(settings);
    })().catch(async (err: Error) => {
      throw new Error(`PGlite could not open ${settings.dir} (${mib(await freeBytes(dataDir))} MiB free): ${err.message}`, {
        cause: err,
      });
    });
    const backend = new Backend(settings, engine, logger);
    return {
      connectIn: (options) => {
        const { connection, ...driverOptions } = (options.driverOptions ?? {}) as { connection?: object };
        // ssl: false whatever PGSSLMODE says: nothing leaves the process.
        const inProcess = { ...connection, ssl: false, stream: () => new Connection(backend) };
        return { ...options, driverOptions: { ...driverOptions, connection: inProcess } };
      },
      failed: () => backend.failure,
      boundStatements: (ms) => backend.bound(ms),
      close: async () => {
        // A backend that ended is not closed; its files stay as a crash leaves them, and PGlite
        // recovers them at the next start.
        await backend.close();
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

/** A statement ran past its bound: the engine's thread was ended with it. */
class StatementOverran extends Error {}

interface PendingRequest {
  resolve(reply: EngineReply): void;
  reject(error: Error): void;
  timer?: NodeJS.Timeout | undefined;
}

/**
 * PGlite on a thread of its own (embedded-engine.ts), and the one request to it at a time. Bounded:
 * a request not answered within `boundMs` ends the thread, which is the only way to stop PGlite in
 * the middle of a statement (it has no timers, so `statement_timeout` never fires in it). What the
 * ended session had not committed is lost, as in a crash, and the next thread recovers the folder.
 */
class EngineThread {
  #pending: PendingRequest | undefined;
  /** Why the thread ended, once it has: a request then fails at once instead of waiting for ever. */
  #ended: string | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (reply: EngineReply) => this.#settle((pending) => pending.resolve(reply)));
    const lost = (error?: Error) => {
      this.#ended ??= `its thread ended${error ? `: ${error.message}` : ''}`;
      this.#settle((pending) => pending.reject(new Error(this.#ended)));
    };
    worker.on('error', lost);
    worker.on('exit', () => lost());
  }

  /** A new thread with PGlite open on `settings.dir`, once it is. */
  static async open(settings: EngineSettings): Promise<EngineThread> {
    const engine = new EngineThread(startModuleWorker(import.meta.url, 'embedded-engine', { workerData: settings }));
    const reply = await new Promise<EngineReply>((resolve, reject) => (engine.#pending = { resolve, reject }));
    if (reply.kind === 'failed') {
      await engine.worker.terminate();
      throw new Error(reply.message);
    }
    return engine;
  }

  /** Asks the thread; past `boundMs` (when given), ends it and throws `StatementOverran`. */
  ask(request: EngineRequest, boundMs?: number): Promise<EngineReply> {
    if (this.#ended !== undefined) return Promise.reject(new Error(this.#ended));
    return new Promise((resolve, reject) => {
      const timer =
        boundMs === undefined
          ? undefined
          : setTimeout(() => {
              this.#settle((pending) => pending.reject(new StatementOverran()));
              void this.worker.terminate();
            }, boundMs);
      this.#pending = { resolve, reject, timer };
      this.worker.postMessage(request);
    });
  }

  terminate(): Promise<number> {
    return this.worker.terminate();
  }

  #settle(settle: (pending: PendingRequest) => void): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    clearTimeout(pending.timer);
    settle(pending);
  }
}

/**
 * PGlite's single backend and the one connection at a time it serves. Messages go to it one by one,
 * in order, and each answer is checked: once the backend reports that it ended (a FATAL or PANIC
 * error, a Query or Sync left without ReadyForQuery, or PGlite throwing), nothing more is sent to it.
 * That is what happens when a new 16 MiB log segment does not fit on the disk: PostgreSQL PANICs,
 * PGlite returns the error but keeps running, and its next message spins in WebAssembly for ever.
 * Refused from then on, every request fails at once (503) and `/healthz` answers 503, so a
 * supervisor restarts the process.
 *
 * Once `bound` is called (after the migrations, which may take long on a large database), a message
 * not answered within the statement timeout is answered as PostgreSQL answers a statement that ran
 * past `statement_timeout` (57014), its connection is ended, and PGlite starts again on a new thread
 * for the next connection.
 */
class Backend {
  failure: string | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #holder: Connection | undefined;
  #engine: Promise<EngineThread>;
  #boundMs: number | undefined;

  constructor(
    private readonly settings: EngineSettings,
    engine: EngineThread,
    private readonly logger: Logger,
  ) {
    this.#engine = Promise.resolve(engine);
  }

  /** From now on, each message is answered within `ms` or its connection ends (see above). */
  bound(ms: number): void {
    this.#boundMs = ms;
  }

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
      const engine = await this.#running();
      if (engine === undefined) {
        return { answer: startup ? fatal('57P03', `the embedded database has stopped: ${this.failure}`) : Buffer.alloc(0), over: true };
      }
      if (startup) {
        // pg gave up on this connection while its startup waited (for a restart, say): it must not
        // take the session it would never give back.
        if (connection.writableEnded || connection.destroyed) return { answer: Buffer.alloc(0), over: true };
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
      let answer: Buffer = Buffer.alloc(0);
      let ended: string | undefined;
      try {
        const reply = await engine.ask({ kind: 'exchange', message }, startup ? undefined : this.#boundMs);
        if (reply.kind === 'answer') answer = Buffer.from(reply.answer.buffer, reply.answer.byteOffset, reply.answer.byteLength);
        else ended = `PGlite failed: ${reply.kind === 'failed' ? reply.message : reply.kind}`;
      } catch (err) {
        if (!(err instanceof StatementOverran)) ended = `PGlite failed: ${(err as Error).message}`;
        else {
          this.#holder = undefined;
          this.#restart();
          this.logger.warn({ boundMs: this.#boundMs }, 'embedded database: a statement ran past the statement timeout; it was ended');
          return { answer: statementTimedOut(), over: true };
        }
      }
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
      const engine = await this.#running();
      if (engine !== undefined) await engine.ask({ kind: 'rollback' });
    }).catch((err: unknown) => this.logger.error({ err }, 'embedded database: rolling back a closed connection failed'));
  }

  /**
   * Closes PGlite once everything asked of it is done, and ends its thread. A backend that ended is
   * not asked anything more (its next step could spin for ever): its thread is just ended.
   */
  close(): Promise<void> {
    return this.#serial(async () => {
      const engine = await this.#engine.catch(() => undefined);
      if (engine !== undefined && this.failure === undefined) await engine.ask({ kind: 'close' });
      await engine?.terminate();
    });
  }

  /** The engine's thread, once it runs; undefined once the backend has ended. */
  async #running(): Promise<EngineThread | undefined> {
    if (this.failure !== undefined) return undefined;
    try {
      return await this.#engine;
    } catch (err) {
      this.failure = `PGlite could not start again: ${(err as Error).message}`;
      this.logger.fatal({ reason: this.failure }, 'the embedded database has stopped; it answers nothing more until the service restarts');
      return undefined;
    }
  }

  /** PGlite on a new thread; the folder is recovered as after a crash. */
  #restart(): void {
    this.#engine = EngineThread.open(this.settings);
    // Awaited by the next message; a failure is reported there.
    this.#engine.catch(() => undefined);
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

/** An ErrorResponse of `severity`, as PostgreSQL writes one. */
function errorResponse(severity: 'ERROR' | 'FATAL', code: string, text: string): Buffer {
  const fields = Buffer.from(`S${severity}\0V${severity}\0C${code}\0M${text}\0\0`);
  const head = Buffer.alloc(5);
  head[0] = ERROR;
  head.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/** A FATAL ErrorResponse, as PostgreSQL refuses a connection. */
const fatal = (code: string, text: string) => errorResponse('FATAL', code, text);

/** What PostgreSQL answers a statement that ran past `statement_timeout`. */
const statementTimedOut = () => errorResponse('ERROR', '57014', 'canceling statement due to statement timeout');

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

  /**
   * pg is done writing (it ended the client, as after a query it gave up on): nothing more will be
   * answered, and the session is free for the next connection at once, without waiting for pg to
   * destroy this stream.
   */
  override _final(done: (error?: Error | null) => void): void {
    this.backend.release(this);
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
