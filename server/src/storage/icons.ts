/**
 * Project icons, stored content-addressed as `<dir>/<sha256>.png` and shown at
 * `{CDN_URL}/icons/<sha256>.png` (API.md §6). Parsing checks everything the contract promises about
 * an icon (API.md §2) before any byte reaches the disk.
 */
import { createHash, randomUUID } from 'node:crypto';
import { access, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { InvalidRequest } from '../errors.js';

export interface Icon {
  bytes: Buffer;
  sha256: string;
}

const DATA_URL_PREFIX = 'data:image/png;base64,';
const MAX_BYTES = 256 * 1024;
const MAX_SIDE = 1024;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** The only valid last chunk: length 0, type IEND, and the CRC of "IEND". */
const IEND_CHUNK = Buffer.from([0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]);

/** A key is a SHA-256 in lower-case hex; nothing else may become a file name. */
export function isIconKey(key: string): boolean {
  return /^[0-9a-f]{64}$/.test(key);
}

function checkKey(key: string): string {
  if (!isIconKey(key)) throw new Error('an icon key must be 64 lower-case hex characters');
  return key;
}

export class IconStore {
  constructor(
    private readonly dir: string,
    /** Read at each use: the service's own `/cdn` address is known only once it listens. */
    private readonly publicBaseUrl: () => string,
  ) {}

  parse(value: string, form: 'create' | 'update', field: string): Icon {
    const refuse = (message: string) => InvalidRequest.field(field, message);

    let base64 = value;
    if (value.startsWith(DATA_URL_PREFIX)) base64 = value.slice(DATA_URL_PREFIX.length);
    else if (form === 'update') throw refuse(`must start with ${DATA_URL_PREFIX}`);

    // Node's decoder skips anything it does not understand; re-encoding tells whether the text was
    // canonical Base64 (alphabet, padding, no whitespace, no URL-safe characters).
    const bytes = Buffer.from(base64, 'base64');
    if (bytes.toString('base64') !== base64) throw refuse('is not valid Base64');
    if (bytes.length > MAX_BYTES) throw refuse('is larger than 256 KiB once decoded');
    if (bytes.length < PNG_SIGNATURE.length || !bytes.subarray(0, 8).equals(PNG_SIGNATURE)) throw refuse('is not a PNG image');

    // The first chunk must be a 13-byte IHDR whose CRC (over type and data) holds.
    if (
      bytes.length < 33 ||
      bytes.readUInt32BE(8) !== 13 ||
      bytes.toString('latin1', 12, 16) !== 'IHDR' ||
      bytes.readUInt32BE(29) !== crc32(bytes.subarray(12, 29))
    ) {
      throw refuse('has an unreadable PNG header');
    }
    const width = bytes.readUInt32BE(16);
    const height = bytes.readUInt32BE(20);
    if (width === 0 || height === 0 || width > MAX_SIDE || height > MAX_SIDE) {
      throw refuse(`must be from 1×1 to ${MAX_SIDE}×${MAX_SIDE} pixels, got ${width}×${height}`);
    }
    if (!bytes.subarray(-IEND_CHUNK.length).equals(IEND_CHUNK)) throw refuse('is truncated: the PNG does not end with an IEND chunk');

    return { bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
  }

  /** Where the icon with this key lives on disk (the CDN middleware serves from here). */
  file(key: string): string {
    return path.join(this.dir, `${checkKey(key)}.png`);
  }

  /**
   * Writes the icon unless the same content is already stored. Files are shared by every project
   * with the same icon, so nothing here ever deletes one: callers save inside their transaction,
   * after the flush that could refuse the change, so a refused change writes no file.
   */
  async save(icon: Icon): Promise<void> {
    const file = this.file(icon.sha256);
    try {
      await access(file);
      return;
    } catch {
      // not stored yet
    }
    await mkdir(this.dir, { recursive: true });
    // Written aside then renamed, so a reader (or a crash) never sees half an icon under its key.
    const temp = path.join(this.dir, `.${icon.sha256}.${randomUUID()}.tmp`);
    try {
      await writeFile(temp, icon.bytes, { flag: 'wx' });
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
}
