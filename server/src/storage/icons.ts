/**
 * Project icons, stored content-addressed as `<dir>/<sha256>.png` and shown at
 * `{CDN_URL}/icons/<sha256>.png`. Parsing checks what an icon may be and bounds what decoding it
 * may cost (png.ts) before decoding it off the event loop (png-codec.ts); what is stored is the
 * image encoded afresh, never the bytes sent, and its key is the SHA-256 of the stored bytes.
 */
import { randomUUID } from 'node:crypto';
import { link, mkdir, opendir, readdir, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidRequest, Unavailable } from '../errors.js';
import { sharedCodec, type PngCodec } from './png-codec.js';
import { inspectPng, PngRejected } from './png.js';

export interface Icon {
  /** The re-encoded PNG: IHDR, IDAT and IEND only. */
  bytes: Buffer;
  sha256: string;
}

const DATA_URL_PREFIX = 'data:image/png;base64,';
const MAX_BYTES = 256 * 1024;
const MAX_SIDE = 1024;
const ICON_FILE = /^([0-9a-f]{64})\.png$/;
/** A file being written (`save`), and a file moved aside while the pruner decides on it (`prune`). */
const TEMP_FILE = /^\.[0-9a-f]{64}\.[0-9a-f-]{36}\.tmp$/;
const ASIDE_FILE = /^\.([0-9a-f]{64})\.[0-9a-f-]{36}\.prune$/;
/** Errors of a full or exhausted file system: the same write may succeed later. */
const RETRYABLE_WRITE_ERRORS = new Set(['ENOSPC', 'EDQUOT', 'EMFILE', 'ENFILE']);

/** A key is a SHA-256 in lower-case hex; nothing else may become a file name. */
export function isIconKey(key: string): boolean {
  return /^[0-9a-f]{64}$/.test(key);
}

function checkKey(key: string): string {
  if (!isIconKey(key)) throw new Error('an icon key must be 64 lower-case hex characters');
  return key;
}

function errorCode(error: unknown): unknown {
  return (error as NodeJS.ErrnoException).code;
}

async function mtimeMs(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).mtimeMs;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/** Writes a file that must not exist yet. */
export type WriteNewFile = (file: string, bytes: Buffer) => Promise<void>;

export interface IconStoreOptions {
  codec?: PngCodec;
  writeNewFile?: WriteNewFile;
}

export interface PruneOptions {
  /** Only files not written or saved again for this long are considered. */
  olderThanMs: number;
  /** Files checked against the database at a time. */
  batchSize: number;
  /** The run stops after removing this many. */
  maxRemovals: number;
  /** Which of these keys something in the database refers to. */
  referenced(keys: string[]): Promise<Set<string>>;
  /** Asked between batches: true ends the run early. */
  stopping(): boolean;
}

export class IconStore {
  private readonly codec: PngCodec;
  private readonly writeNewFile: WriteNewFile;

  constructor(
    private readonly dir: string,
    /** Read at each use: the service's own `/cdn` address is known only once it listens. */
    private readonly publicBaseUrl: () => string,
    options: IconStoreOptions = {},
  ) {
    this.codec = options.codec ?? sharedCodec;
    this.writeNewFile = options.writeNewFile ?? ((file, bytes) => writeFile(file, bytes, { flag: 'wx' }));
  }

  async parse(value: string, form: 'create' | 'update', field: string): Promise<Icon> {
    const refuse = (message: string) => InvalidRequest.field(field, message);

    let base64 = value;
    if (value.startsWith(DATA_URL_PREFIX)) base64 = value.slice(DATA_URL_PREFIX.length);
    else if (form === 'update') throw refuse(`must start with ${DATA_URL_PREFIX}`);

    // Node's decoder skips anything it does not understand; re-encoding tells whether the text was
    // canonical Base64 (alphabet, padding, no whitespace, no URL-safe characters).
    const bytes = Buffer.from(base64, 'base64');
    if (bytes.toString('base64') !== base64) throw refuse('is not valid Base64');
    if (bytes.length > MAX_BYTES) throw refuse('is larger than 256 KiB once decoded');
    // The checks that need no inflation, here: most refusals cost no trip to the worker.
    try {
      inspectPng(bytes, MAX_SIDE);
    } catch (error) {
      if (error instanceof PngRejected) throw refuse(error.message);
      throw error;
    }
    const result = await this.codec.transcode(bytes, MAX_SIDE);
    if (!result.ok) throw refuse(result.refusal);
    return { bytes: result.png, sha256: result.sha256 };
  }

  /** Where the icon with this key lives on disk (the CDN middleware serves from here). */
  file(key: string): string {
    return path.join(this.dir, `${checkKey(key)}.png`);
  }

  /**
   * Stores the icon, or marks the stored copy as just used. Callers save inside their transaction,
   * after the flush that could refuse the change, so a refused change writes no file; a file whose
   * change rolls back anyway is left for `prune`. A full disk is 503 `unavailable`, which rolls the
   * caller's transaction back.
   */
  async save(icon: Icon): Promise<void> {
    const file = this.file(icon.sha256);
    try {
      await this.write(file, icon);
    } catch (error) {
      if (RETRYABLE_WRITE_ERRORS.has(errorCode(error) as string)) {
        throw new Unavailable('There is no room to store the icon right now; nothing was changed. Retry later.', 60);
      }
      throw error;
    }
  }

  private async write(file: string, icon: Icon): Promise<void> {
    // A stored copy is touched rather than skipped: its fresh mtime keeps `prune` away from it
    // until the transaction that now refers to it has committed.
    try {
      const now = new Date();
      await utimes(file, now, now);
      return;
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw error;
    }
    await mkdir(this.dir, { recursive: true });
    // Written aside then renamed, so a reader (or a crash) never sees half an icon under its key.
    const temp = path.join(this.dir, `.${icon.sha256}.${randomUUID()}.tmp`);
    try {
      await this.writeNewFile(temp, icon.bytes);
      await rename(temp, file);
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
  }

  url(key: string | null | undefined): string | null {
    if (key == null) return null;
    return `${this.publicBaseUrl()}/icons/${checkKey(key)}.png`;
  }

  /**
   * Cleans up after a process killed mid-write or mid-prune: removes temporary files older than
   * `olderThanMs` (younger ones may be another instance's write in progress), and puts back any
   * file `prune` had moved aside (putting back is always safe; the next prune decides again).
   * Returns how many temporary files were removed.
   */
  async sweep(olderThanMs: number): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return 0;
      throw error;
    }
    const cutoff = Date.now() - olderThanMs;
    let removed = 0;
    for (const name of names) {
      const file = path.join(this.dir, name);
      const aside = ASIDE_FILE.exec(name)?.[1];
      if (aside !== undefined) await this.putBack(file, aside);
      else if (TEMP_FILE.test(name) && ((await mtimeMs(file)) ?? Infinity) < cutoff) {
        await rm(file, { force: true });
        removed += 1;
      }
    }
    return removed;
  }

  /**
   * Removes icon files nothing refers to, in batches, and returns how many. A file is removed only
   * if it is older than `olderThanMs` and, after being moved aside (from then on a `save` of the
   * same icon writes a new copy), is still old (a `save` touches it) and still unreferenced.
   */
  async prune(options: PruneOptions): Promise<number> {
    let dir;
    try {
      dir = await opendir(this.dir);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return 0;
      throw error;
    }
    let removed = 0;
    let batch: string[] = [];
    // Breaking out of the loop closes the directory.
    for await (const entry of dir) {
      const key = ICON_FILE.exec(entry.name)?.[1];
      if (key === undefined || !entry.isFile()) continue;
      batch.push(key);
      if (batch.length < options.batchSize) continue;
      removed += await this.pruneBatch(batch, options);
      batch = [];
      if (removed >= options.maxRemovals || options.stopping()) return removed;
    }
    return removed + (batch.length > 0 ? await this.pruneBatch(batch, options) : 0);
  }

  private async pruneBatch(keys: string[], options: PruneOptions): Promise<number> {
    const cutoff = Date.now() - options.olderThanMs;
    const old: string[] = [];
    for (const key of keys) if (((await mtimeMs(this.file(key))) ?? Infinity) < cutoff) old.push(key);
    if (old.length === 0) return 0;
    const referenced = await options.referenced(old);
    const aside = new Map<string, string>();
    for (const key of old.filter((k) => !referenced.has(k))) {
      const moved = path.join(this.dir, `.${key}.${randomUUID()}.prune`);
      try {
        await rename(this.file(key), moved);
        aside.set(key, moved);
      } catch (error) {
        if (errorCode(error) !== 'ENOENT') throw error;
      }
    }
    if (aside.size === 0) return 0;
    const stillReferenced = await options.referenced([...aside.keys()]);
    let removed = 0;
    for (const [key, moved] of aside) {
      if (stillReferenced.has(key) || ((await mtimeMs(moved)) ?? 0) >= cutoff) await this.putBack(moved, key);
      else {
        await rm(moved, { force: true });
        removed += 1;
      }
    }
    return removed;
  }

  /** Returns a moved-aside file under its key, unless a new copy (same bytes) was saved meanwhile. */
  private async putBack(moved: string, key: string): Promise<void> {
    try {
      await link(moved, this.file(key));
    } catch (error) {
      if (errorCode(error) !== 'EEXIST' && errorCode(error) !== 'ENOENT') throw error;
    }
    await rm(moved, { force: true });
  }
}
