/**
 * Project and user icons, stored content-addressed and shown at `{CDN_URL}/icons/<sha256>.png`.
 * Parsing checks what an icon may be and bounds what decoding it may cost (png.ts) before decoding
 * it off the event loop (png-codec.ts); what is stored is the image encoded afresh, never the bytes
 * sent, and its key is the SHA-256 of the stored bytes. The re-encoding is held to the same 256 KiB
 * as what is sent, so that what one request stores and every `/cdn` answer serves stay bounded.
 *
 * Every stored icon has a row in the database (`IconRows`, domain/icons.ts), which holds its bytes
 * too unless an S3-compatible bucket (`IconBucket`, s3.ts) does. The row is what pruning decides
 * on, under its lock, whichever holds the bytes. A user's change that stores an icon also removes
 * the icons that user stored last and nothing refers to any more (`release`), so that a loop of
 * changes keeps about one such icon per user rather than an hour's worth until the prune. Reads go
 * through a small in-memory cache.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { InvalidRequest } from '../errors.js';
import { IconCache } from './icon-cache.js';
import { sharedCodec, type PngCodec } from './png-codec.js';
import { inspectPng, PngRejected } from './png.js';

export interface Icon {
  /** The re-encoded PNG: IHDR, IDAT and IEND only. */
  bytes: Buffer;
  sha256: string;
  /** The user who sent it (`parse`); none for an icon that came from elsewhere (the disk of an earlier release). */
  sender?: string;
}

const DATA_URL_PREFIX = 'data:image/png;base64,';
export const MAX_ICON_BYTES = 256 * 1024;
export const MAX_ICON_SIDE = 1024;
/** 32 of the largest icons, thousands of usual ones. */
const CACHE_BYTES = 8 * 1024 * 1024;

/** A key is a SHA-256 in lower-case hex; nothing else may name an icon. */
export function isIconKey(key: string): boolean {
  return /^[0-9a-f]{64}$/.test(key);
}

function checkKey(key: string): string {
  if (!isIconKey(key)) throw new Error('an icon key must be 64 lower-case hex characters');
  return key;
}

export interface PruneOptions {
  /** Only icons not stored or referred to again for this long are considered. */
  graceMs: number;
  /** Icons removed at a time. */
  batchSize: number;
  /** The run stops after this many batches. */
  maxBatches: number;
  /** Asked between batches: true ends the run early. */
  stopping(): boolean;
}

/** The `icons` table, as the store uses it. */
export interface IconRows {
  /**
   * Records the icon in `tx`, with its bytes when `withBytes`, or marks its row as just stored (by
   * its sender, when it has one); the row stays locked until `tx` ends, and pruning cannot take it
   * meanwhile.
   */
  record(tx: EntityManager, icon: Icon, withBytes: boolean): Promise<void>;
  /**
   * Deletes in `tx` the rows of the icons `sender` stored last that nothing refers to, but `keep`
   * and any row another transaction holds, and answers their keys. A concurrent change that makes
   * one of them its icon either holds its row (it is kept), committed first (its reference keeps
   * it), or waits for `tx` and then stores it anew.
   */
  release(tx: EntityManager, sender: string, keep: string): Promise<string[]>;
  /** The bytes of the icon's row; undefined when there is no row or it holds no bytes. */
  bytes(key: string): Promise<Buffer | undefined>;
  /**
   * Deletes the rows of icons nothing refers to and older than the grace period, in batches, and
   * answers their keys. `removing` runs in each batch's transaction with that batch's keys, before
   * it commits: until then their rows stay locked, and a failure keeps them.
   */
  prune(options: PruneOptions, removing?: (keys: string[]) => Promise<void>): Promise<string[]>;
  /** Runs `work` in a transaction of its own. */
  transaction<T>(work: (tx: EntityManager) => Promise<T>): Promise<T>;
}

/** Where the bytes live when not in the database. Every call is bounded in time; a failure is 503 `unavailable`. */
export interface IconBucket {
  /** Writes the icon under its key, whether or not it is there already. */
  put(icon: Icon): Promise<void>;
  /** The icon's bytes, or undefined when the bucket has no such key. */
  get(key: string): Promise<Buffer | undefined>;
  /** Removes these keys; a key that is not there is no failure. */
  delete(keys: string[]): Promise<void>;
}

export interface IconStoreOptions {
  /** Keeps the bytes in this bucket rather than in the database. */
  bucket?: IconBucket | undefined;
  codec?: PngCodec;
}

export class IconStore {
  private readonly bucket: IconBucket | undefined;
  private readonly codec: PngCodec;
  private readonly cache = new IconCache(CACHE_BYTES);
  /** Reads under way, by key: concurrent requests for one icon share one read of the store. */
  private readonly reading = new Map<string, Promise<Buffer | undefined>>();

  constructor(
    private readonly rows: IconRows,
    /** Read at each use: the service's own `/cdn` address is known only once it listens. */
    private readonly publicBaseUrl: () => string,
    options: IconStoreOptions = {},
  ) {
    this.bucket = options.bucket;
    this.codec = options.codec ?? sharedCodec;
  }

  /** `sender`: the user whose change it is (the codec shares its worker between users; `save` releases their old icons). */
  async parse(value: string, form: 'create' | 'update', field: string, sender: string): Promise<Icon> {
    const refuse = (message: string) => InvalidRequest.field(field, message);

    let base64 = value;
    if (value.startsWith(DATA_URL_PREFIX)) base64 = value.slice(DATA_URL_PREFIX.length);
    else if (form === 'update') throw refuse(`must start with ${DATA_URL_PREFIX}`);

    // Node's decoder skips anything it does not understand; re-encoding tells whether the text was
    // canonical Base64 (alphabet, padding, no whitespace, no URL-safe characters).
    const bytes = Buffer.from(base64, 'base64');
    if (bytes.toString('base64') !== base64) throw refuse('is not valid Base64');
    if (bytes.length > MAX_ICON_BYTES) throw refuse('is larger than 256 KiB once decoded');
    // The checks that need no inflation, here: most refusals cost no trip to the worker.
    try {
      inspectPng(bytes, MAX_ICON_SIDE);
    } catch (error) {
      if (error instanceof PngRejected) throw refuse(error.message);
      throw error;
    }
    const result = await this.codec.transcode(bytes, MAX_ICON_SIDE, sender);
    if (!result.ok) throw refuse(result.refusal);
    if (result.png.length > MAX_ICON_BYTES) {
      throw refuse('is larger than 256 KiB once re-encoded; save it with fewer colours or a smaller size');
    }
    return { bytes: result.png, sha256: result.sha256, sender };
  }

  /**
   * Stores the icon in the caller's transaction, or marks the stored copy as just used. Callers save
   * after the flush that could refuse the change, so a refused change stores nothing; with the
   * bytes in the database, a change that rolls back takes its icon with it. The row comes first:
   * held from then on, it keeps a prune from removing the bucket's copy until `tx` ends. An icon
   * with a sender then releases that sender's other icons nothing refers to, their bucket copies
   * deleted before `tx` commits, as a prune's are. A bucket that fails is 503 `unavailable`, which
   * rolls the caller's transaction back.
   */
  async save(tx: EntityManager, icon: Icon): Promise<void> {
    checkKey(icon.sha256);
    await this.rows.record(tx, icon, this.bucket === undefined);
    await this.bucket?.put(icon);
    if (icon.sender === undefined) return;
    const released = await this.rows.release(tx, icon.sender, icon.sha256);
    if (released.length === 0) return;
    await this.bucket?.delete(released);
    for (const key of released) this.cache.delete(key);
  }

  /** `save` in a transaction of its own. */
  saveAlone(icon: Icon): Promise<void> {
    return this.rows.transaction((tx) => this.save(tx, icon));
  }

  /** The icon's bytes, or undefined when it is not stored. */
  async read(key: string): Promise<Buffer | undefined> {
    checkKey(key);
    const cached = this.cache.get(key);
    if (cached) return cached;
    let reading = this.reading.get(key);
    if (!reading) {
      reading = this.load(key).finally(() => this.reading.delete(key));
      this.reading.set(key, reading);
    }
    return reading;
  }

  private async load(key: string): Promise<Buffer | undefined> {
    const bytes = this.bucket ? await this.bucket.get(key) : await this.rows.bytes(key);
    if (bytes) this.cache.set(key, bytes);
    return bytes;
  }

  /** The address icons are served under: `CDN_URL`, or the service's own `/cdn`. */
  baseUrl(): string {
    return this.publicBaseUrl();
  }

  url(key: string | null | undefined): string | null {
    if (key == null) return null;
    return `${this.publicBaseUrl()}/icons/${checkKey(key)}.png`;
  }

  /**
   * Removes icons nothing refers to and not stored or referred to again within `graceMs`, in
   * batches, and answers how many. With a bucket, a batch's objects are deleted before its rows'
   * deletion commits: a save of one of them waits for that, then stores it anew.
   */
  async prune(options: PruneOptions): Promise<number> {
    const bucket = this.bucket;
    const removed = await this.rows.prune(options, bucket && ((keys) => bucket.delete(keys)));
    for (const key of removed) this.cache.delete(key);
    return removed.length;
  }
}
