/**
 * The icon store and the /cdn middleware on their own, on the run's database: every refusal (and
 * that it stores nothing), hostile images (HTML in a PNG, impossible headers, zlib bombs,
 * animations), what is stored (a re-encoding: IHDR, IDAT and IEND, the same pixels; one row per
 * icon, its bytes in the row or in a bucket), the read cache, a bucket that cannot be reached (503,
 * nothing changed), icons an earlier release left on disk moving into the store, bounded
 * transcoding, and what the CDN answers, on a throwaway Koa app behind the real envelope. The last
 * part goes through the running service (on the embedded database by default).
 */
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import Koa from 'koa';
import { pino } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { Project, User } from '../../server/src/db/entities.js';
import { DatabaseIconRows } from '../../server/src/domain/icons.js';
import { changeProject, createOwnedProject } from '../../server/src/domain/projects.js';
import { ApiError, InvalidRequest, Unavailable } from '../../server/src/errors.js';
import { cdn } from '../../server/src/http/cdn.js';
import { envelope } from '../../server/src/http/envelope.js';
import { representations } from '../../server/src/http/representation.js';
import { moveDiskIcons } from '../../server/src/storage/disk-icons.js';
import { IconCache } from '../../server/src/storage/icon-cache.js';
import { IconStore, type Icon, type IconBucket, type IconRows } from '../../server/src/storage/icons.js';
import { PngCodec } from '../../server/src/storage/png-codec.js';
import { S3Bucket } from '../../server/src/storage/s3.js';
import { count, database, sha256, sql } from '../support/harness.js';
import { iconRow, rawRequest } from '../support/icons.js';
import { freePort } from '../support/pg-cluster.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { call, expectData } from '../support/http.js';
import { createProject, iconUrl, namespaceName } from '../support/projects.js';
import {
  chunk,
  chunkTypes,
  decodePng,
  encodePng,
  ihdr,
  notPng,
  png,
  PNG_SIGNATURE,
  pngOfSize,
  storedIcon,
  type ImageSpec,
} from '../support/png.js';

const FIELD = '/body/icon';
/** A user of its own for each parse: a save then releases no icon another test stored. */
const sender = () => randomUUID();
const DATA_URL = 'data:image/png;base64,';
const HTML = Buffer.from('<!doctype html><html><body><script>alert(document.cookie)</script></body></html>');
const IEND = chunk('IEND', Buffer.alloc(0));

/** What an answer from the envelope carries for a thrown ApiError: status, headers and body. */
function asAnswer(error: unknown) {
  expect(error).to.be.instanceOf(ApiError);
  const { status, headers, code, message } = error as ApiError;
  return { status, headers, body: { success: false, error: { code, message } } };
}

/** Width × height RGBA pixels, 8 bits, from a function: the expectation a decoded icon is compared to. */
function rgbaOf(width: number, height: number, pixel: (x: number, y: number) => [number, number, number, number]): Buffer {
  const out = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) out.set(pixel(x, y), (y * width + x) * 4);
  return out;
}

/**
 * The raw scanlines of an RGBA frame whose top row has `colour` and the rest is transparent black:
 * 4 MiB that deflate to 4 KiB, so 62 such frames fit in an icon's 256 KiB.
 */
function frameRows(side: number, colour: [number, number, number, number]): Buffer {
  const rows = Buffer.alloc((1 + side * 4) * side);
  rows[0] = 1; // filter Sub: each pixel of the top row is its left neighbour plus zero
  rows.set(colour, 1);
  return rows;
}

/** An APNG: `frames` full-size frames, each with its own colour, the first one also the default image (IDAT). */
function apng(side: number, frames: number): Buffer {
  const colour = (f: number): [number, number, number, number] => [f * 4, 255 - f * 4, 128, 255];
  let sequence = 0;
  const fcTL = () => {
    const data = Buffer.alloc(26);
    data.writeUInt32BE(sequence++, 0);
    data.writeUInt32BE(side, 4);
    data.writeUInt32BE(side, 8);
    data.writeUInt16BE(1, 20); // delay 1/10 s
    data.writeUInt16BE(10, 22);
    return chunk('fcTL', data);
  };
  const acTL = Buffer.alloc(8);
  acTL.writeUInt32BE(frames, 0);
  const parts = [PNG_SIGNATURE, chunk('IHDR', ihdr(side, side, 8, 6)), chunk('acTL', acTL), fcTL()];
  parts.push(chunk('IDAT', deflateSync(frameRows(side, colour(0)), { level: 9 })));
  for (let f = 1; f < frames; f++) {
    parts.push(fcTL());
    const head = Buffer.alloc(4);
    head.writeUInt32BE(sequence++);
    parts.push(chunk('fdAT', Buffer.concat([head, deflateSync(frameRows(side, colour(f)), { level: 9 })])));
  }
  return Buffer.concat([...parts, IEND]);
}

/** A 16×16 RGB PNG whose image data inflates to `inflated` bytes of zeros (the header's pixels hold 784). */
function zlibBomb(inflated: number, interlace: 0 | 1): Buffer {
  const data = deflateSync(Buffer.alloc(inflated), { level: 9 });
  return Buffer.concat([PNG_SIGNATURE, chunk('IHDR', ihdr(16, 16, 8, 2, interlace)), chunk('IDAT', data), IEND]);
}

/** The icon store's rows on the run's database, as the service builds them. */
function databaseRows(): DatabaseIconRows {
  return new DatabaseIconRows(() => database().orm.em.fork());
}

/** How many icons the database records. */
function storedIcons(): Promise<number> {
  return count('select count(*)::int from icons');
}

/** A bucket that cannot be reached: nothing listens at its address. Every call fails within its 1 s bound. */
async function unreachableBucket(): Promise<S3Bucket> {
  const settings = {
    bucket: 'icons',
    endpoint: `http://127.0.0.1:${await freePort()}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKUNREACHABLE', secretAccessKey: 'unreachable-secret' },
    forcePathStyle: true,
    timeoutMs: 1_000,
  };
  return S3Bucket.open(settings, pino({ level: 'silent' }));
}

/** An in-memory bucket, counting its reads. */
class MemoryBucket implements IconBucket {
  readonly objects = new Map<string, Buffer>();
  reads = 0;

  async put(icon: Icon): Promise<void> {
    this.objects.set(icon.sha256, icon.bytes);
  }

  async get(key: string): Promise<Buffer | undefined> {
    this.reads += 1;
    return this.objects.get(key);
  }

  async delete(keys: string[]): Promise<void> {
    for (const key of keys) this.objects.delete(key);
  }
}

describe('icon store', () => {
  let base: string;
  let store: IconStore;
  let storedBefore: number;

  beforeEach(async () => {
    base = 'http://cdn.test/cdn';
    store = new IconStore(databaseRows(), () => base);
    storedBefore = await storedIcons();
  });

  /** Parses expecting a refusal: a 400 pointing at the field, with nothing written. */
  async function refusal(value: string, form: 'create' | 'update' = 'create'): Promise<InvalidRequest> {
    let thrown: unknown;
    try {
      await store.parse(value, form, FIELD, sender());
    } catch (error) {
      thrown = error;
    }
    expect(thrown).to.be.instanceOf(InvalidRequest);
    const error = thrown as InvalidRequest;
    expect(error.status).to.equal(400);
    expect(error.code).to.equal('invalid_request');
    expect(error.details).to.have.length(1);
    expect(error.details![0]!.path).to.equal(FIELD);
    expect(error.message).to.match(/^icon /);
    expect(error.details![0]!.message).to.equal(error.message.slice('icon '.length));
    expect(await storedIcons()).to.equal(storedBefore);
    return error;
  }

  describe('parse', () => {
    it('accepts bare Base64 and a data URL on create, and keys the icon by the SHA-256 of its re-encoding', async () => {
      const bytes = png(32, 32);
      for (const value of [bytes.toString('base64'), DATA_URL + bytes.toString('base64')]) {
        const icon = await store.parse(value, 'create', FIELD, sender());
        expect(icon.sha256).to.equal(sha256(icon.bytes));
        expect(decodePng(icon.bytes).rgba.equals(decodePng(bytes).rgba)).to.equal(true);
      }
      expect(await storedIcons()).to.equal(storedBefore);
    });

    it('accepts a data URL on update and refuses bare Base64 or another media type', async () => {
      const b64 = png(8, 8).toString('base64');
      expect(decodePng((await store.parse(DATA_URL + b64, 'update', FIELD, sender())).bytes).width).to.equal(8);
      expect((await refusal(b64, 'update')).message).to.contain('data:image/png;base64,');
      expect((await refusal(`data:image/jpeg;base64,${b64}`, 'update')).message).to.contain('data:image/png;base64,');
    });

    it('refuses Base64 that is not strict: bad padding, whitespace, URL-safe or foreign characters', async () => {
      const b64 = png(8, 8).toString('base64');
      for (const value of [
        b64.replace(/=+$/, ''), // padding dropped
        `${b64.slice(0, 20)}\n${b64.slice(20)}`,
        ` ${b64}`,
        `${b64.replace(/=+$/, '')}===`,
        b64.replace(/\+/g, '-').replace(/\//g, '_') + '-_', // URL-safe alphabet
        `${b64.slice(0, 20)}*${b64.slice(21)}`,
        'AB==', // bits left over after the last byte must be zero
      ]) {
        expect((await refusal(value)).message, JSON.stringify(value.slice(0, 30))).to.equal('icon is not valid Base64');
      }
      expect((await refusal(`${DATA_URL}${b64} `)).message).to.equal('icon is not valid Base64');
    });

    it('accepts exactly 256 KiB decoded (storing it without its padding text) and refuses one byte more', async () => {
      const limit = pngOfSize(262_144);
      expect(limit.length).to.equal(262_144);
      const icon = await store.parse(limit.toString('base64'), 'create', FIELD, sender());
      expect(chunkTypes(icon.bytes)).to.deep.equal(['IHDR', 'IDAT', 'IEND']);
      expect(icon.bytes.length).to.be.below(1024);
      const over = pngOfSize(262_145);
      expect((await refusal(over.toString('base64'))).message).to.contain('256 KiB');
    });

    it('refuses what is not a PNG', async () => {
      for (const bytes of [notPng, Buffer.alloc(0), PNG_SIGNATURE.subarray(0, 7), Buffer.from('not an image at all')]) {
        expect((await refusal(bytes.toString('base64'))).message).to.equal('icon is not a PNG image');
      }
    });

    it('refuses a PNG whose header is missing, misplaced, mis-sized or corrupt', async () => {
      const good = png(4, 4);
      const badCrc = Buffer.from(good);
      badCrc[17] = 0xff; // width's second byte: the IHDR CRC no longer holds
      const header = good.subarray(16, 29);
      for (const bytes of [
        PNG_SIGNATURE,
        good.subarray(0, 30), // cut inside IHDR
        badCrc,
        Buffer.concat([PNG_SIGNATURE, chunk('tEXt', Buffer.from('a\0b')), good.subarray(8)]), // IHDR not first
        Buffer.concat([PNG_SIGNATURE, chunk('IHDR', header.subarray(0, 12)), good.subarray(33)]), // 12-byte IHDR
        Buffer.concat([PNG_SIGNATURE, chunk('IHDx', header), good.subarray(33)]),
      ]) {
        expect((await refusal(bytes.toString('base64'))).message).to.equal('icon has an unreadable PNG header');
      }
    });

    it('accepts 1×1 and 1024×1024 and refuses a side of 0 or over 1024', async () => {
      for (const [w, h] of [
        [1, 1],
        [1024, 1024],
      ] as const) {
        expect(decodePng((await store.parse(png(w, h).toString('base64'), 'create', FIELD, sender())).bytes).width).to.equal(w);
      }
      for (const [w, h] of [
        [0, 1],
        [1, 0],
        [1025, 1],
        [1, 1025],
      ] as const) {
        expect((await refusal(png(w, h).toString('base64'))).message).to.equal(`icon must be from 1×1 to 1024×1024 pixels, got ${w}×${h}`);
      }
    });

    it('refuses a PNG that does not end with IEND', async () => {
      const good = png(4, 4);
      for (const bytes of [good.subarray(0, -12), good.subarray(0, -1), Buffer.concat([good, Buffer.from([0])])]) {
        expect((await refusal(bytes.toString('base64'))).message).to.contain('IEND');
      }
    });

    // Hostile images: each is refused, or stored as a harmless re-encoding.
    it('refuses header fields the PNG specification does not allow (bit depth 3, colour type 9, …)', async () => {
      const cases: [Buffer, string][] = [
        [ihdr(8, 8, 3, 2), 'icon has bit depth 3, which PNG colour type 2 does not allow'],
        [ihdr(8, 8, 8, 9), 'icon has an unknown PNG colour type 9'],
        [ihdr(8, 8, 16, 3), 'icon has bit depth 16, which PNG colour type 3 does not allow'],
        [ihdr(8, 8, 1, 6), 'icon has bit depth 1, which PNG colour type 6 does not allow'],
        [ihdr(8, 8, 8, 2, 2), 'icon has an unknown PNG compression, filter or interlace method'],
        [
          Buffer.concat([ihdr(8, 8, 8, 2).subarray(0, 10), Buffer.from([1, 0, 0])]), // compression method 1
          'icon has an unknown PNG compression, filter or interlace method',
        ],
      ];
      const pixels = chunk('IDAT', deflateSync(Buffer.alloc(8 * 25)));
      for (const [header, message] of cases) {
        const bytes = Buffer.concat([PNG_SIGNATURE, chunk('IHDR', header), pixels, IEND]);
        expect((await refusal(bytes.toString('base64'))).message).to.equal(message);
      }
    });

    it('refuses a PNG with no image data whose middle is an HTML page, bare or in a chunk', async () => {
      const head = png(8, 8).subarray(0, 33); // signature and IHDR
      const bare = Buffer.concat([head, HTML, IEND]);
      expect((await refusal(bare.toString('base64'))).message).to.equal('icon is truncated: the PNG does not end with an IEND chunk');
      const wrapped = Buffer.concat([head, chunk('htMl', HTML), IEND]);
      expect((await refusal(wrapped.toString('base64'))).message).to.equal('icon has no image data (no IDAT chunk)');
      const after = Buffer.concat([png(8, 8), HTML]);
      expect((await refusal(after.toString('base64'))).message).to.equal('icon has data after its IEND chunk');
    });

    it('refuses a zlib bomb: image data that inflates past what the header’s pixels hold, interlaced or not', async function () {
      this.timeout(60_000);
      for (const interlace of [0, 1] as const) {
        const bomb = zlibBomb(200 * 1024 * 1024, interlace);
        expect(bomb.length).to.be.at.most(256 * 1024);
        const started = Date.now();
        expect((await refusal(bomb.toString('base64'))).message).to.equal('icon has more image data than 16×16 pixels hold');
        expect(Date.now() - started, 'refused without inflating it all').to.be.below(1_000);
      }
    });

    it('refuses image data that is short, damaged, split, misplaced or of an unknown critical kind', async () => {
      const head = png(16, 16).subarray(0, 33);
      const rows = Buffer.alloc(16 * 49);
      const idat = chunk('IDAT', deflateSync(rows));
      const badCrc = Buffer.from(idat);
      badCrc[badCrc.length - 1] = badCrc[badCrc.length - 1]! ^ 1;
      const paletteHead = Buffer.concat([PNG_SIGNATURE, chunk('IHDR', ihdr(16, 16, 8, 3))]);
      const paletteIdat = chunk('IDAT', deflateSync(Buffer.alloc(16 * 17)));
      const text = chunk('tEXt', Buffer.from('a\0b'));
      const onePixelOfIndex1 = deflateSync(Buffer.from([0, 0, 1])); // filter None, then indices 0 and 1
      const cases: [Buffer[], string][] = [
        [[head, chunk('IDAT', deflateSync(rows.subarray(1))), IEND], 'icon has less image data than 16×16 pixels need'],
        [[head, chunk('IDAT', Buffer.from('not a zlib stream')), IEND], 'icon has damaged image data (it does not inflate)'],
        [[head, badCrc, IEND], 'icon has a damaged IDAT chunk (its CRC does not match)'],
        [[head, idat.subarray(0, 20), text, idat, IEND], 'icon has a damaged IDAT chunk (its CRC does not match)'],
        [[head, chunk('IDAT', Buffer.alloc(0)), text, idat, IEND], 'icon has its IDAT chunks split by other chunks'],
        [[head, chunk('ABCD', Buffer.alloc(1)), idat, IEND], 'icon has a critical chunk of unknown type ABCD'],
        [[head, chunk('IHDR', ihdr(16, 16, 8, 2)), idat, IEND], 'icon has a second IHDR chunk'],
        [[head, chunk('a1b2', Buffer.alloc(1)), idat, IEND], 'icon has a malformed PNG chunk (its type is not four letters)'],
        [[paletteHead, paletteIdat, IEND], 'icon has no PLTE chunk, which its palette colour type needs'],
        [[paletteHead, chunk('PLTE', Buffer.alloc(4)), idat, IEND], 'icon has a malformed PLTE chunk'],
        [[head, idat, chunk('PLTE', Buffer.alloc(3)), IEND], 'icon has a misplaced PLTE chunk'],
        // Index 1 of a one-colour palette: the structure holds, decoding does not.
        [
          [PNG_SIGNATURE, chunk('IHDR', ihdr(2, 1, 8, 3)), chunk('PLTE', Buffer.alloc(3)), chunk('IDAT', onePixelOfIndex1), IEND],
          'icon could not be decoded as a PNG image',
        ],
      ];
      for (const [parts, message] of cases) {
        expect((await refusal(Buffer.concat(parts).toString('base64'))).message, message).to.equal(message);
      }
    });

    it('stores only IHDR, IDAT and IEND: text, private chunks and HTML are dropped, the pixels kept', async () => {
      const original = png(12, 9, { color: [9, 99, 199] });
      const head = original.subarray(0, 33);
      const rest = original.subarray(33);
      const bytes = Buffer.concat([head, chunk('tEXt', Buffer.concat([Buffer.from('Comment\0'), HTML])), chunk('htMl', HTML), rest]);
      const icon = await store.parse(bytes.toString('base64'), 'create', FIELD, sender());
      expect(chunkTypes(icon.bytes)).to.deep.equal(['IHDR', 'IDAT', 'IEND']);
      expect(icon.bytes.includes('<html')).to.equal(false);
      expect(icon.bytes.includes('script')).to.equal(false);
      const decoded = decodePng(icon.bytes);
      expect([decoded.width, decoded.height, decoded.bitDepth, decoded.colourType]).to.deep.equal([12, 9, 8, 2]);
      expect(decoded.rgba.equals(rgbaOf(12, 9, () => [9, 99, 199, 255]))).to.equal(true);
    });

    it('keeps an APNG’s default image and drops its animation: 62 full-size frames (248 MiB decoded) cost one', async () => {
      const bytes = apng(1024, 62);
      expect(bytes.length).to.be.at.most(256 * 1024);
      expect(chunkTypes(bytes).filter((type) => type === 'fdAT')).to.have.length(61);
      const icon = await store.parse(bytes.toString('base64'), 'create', FIELD, sender());
      expect(chunkTypes(icon.bytes)).to.deep.equal(['IHDR', 'IDAT', 'IEND']);
      const decoded = decodePng(icon.bytes);
      expect([decoded.width, decoded.height]).to.deep.equal([1024, 1024]);
      expect(decoded.rgba.equals(rgbaOf(1024, 1024, (_, y) => (y === 0 ? [0, 255, 128, 255] : [0, 0, 0, 0])))).to.equal(true);
    });

    it('decodes every colour type and bit depth, interlaced or not, to the same pixels', async () => {
      const palette = Array.from({ length: 16 }, (_, i) => [i * 16, 255 - i * 16, (i * 40) % 256] as const);
      const images: [ImageSpec, (x: number, y: number) => [number, number, number, number]][] = [
        [
          { width: 13, height: 7, bitDepth: 1, colourType: 0, sample: (x, y) => (x + y) % 2 },
          (x, y) => [((x + y) % 2) * 255, ((x + y) % 2) * 255, ((x + y) % 2) * 255, 255],
        ],
        [{ width: 10, height: 3, bitDepth: 16, colourType: 0, sample: (x) => x * 20 * 257 }, (x) => [x * 20, x * 20, x * 20, 255]],
        [
          { width: 17, height: 11, bitDepth: 8, colourType: 2, interlaced: true, sample: (x, y, c) => (x * 13 + y * 7 + c * 50) & 255 },
          (x, y) => [(x * 13 + y * 7) & 255, (x * 13 + y * 7 + 50) & 255, (x * 13 + y * 7 + 100) & 255, 255],
        ],
        [
          {
            width: 9,
            height: 9,
            bitDepth: 16,
            colourType: 6,
            interlaced: true,
            sample: (x, y, c) => ((x * 25 + y * 3 + c * 60) & 255) * 257,
          },
          (x, y) => [0, 1, 2, 3].map((c) => (x * 25 + y * 3 + c * 60) & 255) as [number, number, number, number],
        ],
        [
          { width: 5, height: 4, bitDepth: 8, colourType: 4, sample: (x, y, c) => (c === 0 ? x * 50 : y * 60) },
          (x, y) => [x * 50, x * 50, x * 50, y * 60],
        ],
        [
          {
            width: 11,
            height: 6,
            bitDepth: 4,
            colourType: 3,
            sample: (x, y) => (x + y) % 16,
            before: [chunk('PLTE', Buffer.from(palette.flat())), chunk('tRNS', Buffer.from([0, 128]))],
          },
          (x, y) => {
            const i = (x + y) % 16;
            return [...palette[i]!, i === 0 ? 0 : i === 1 ? 128 : 255];
          },
        ],
      ];
      for (const [spec, pixel] of images) {
        const what = `colour type ${spec.colourType}, ${spec.bitDepth} bits${spec.interlaced ? ', interlaced' : ''}`;
        const icon = await store.parse(encodePng(spec).toString('base64'), 'create', FIELD, sender());
        expect(chunkTypes(icon.bytes), what).to.deep.equal(['IHDR', 'IDAT', 'IEND']);
        const decoded = decodePng(icon.bytes);
        const expected = rgbaOf(spec.width, spec.height, pixel);
        const opaque = expected.every((value, i) => i % 4 !== 3 || value === 255);
        const header = [decoded.width, decoded.height, decoded.bitDepth, decoded.colourType];
        expect(header, what).to.deep.equal([spec.width, spec.height, 8, opaque ? 2 : 6]);
        expect(decoded.rgba.equals(expected), what).to.equal(true);
      }
    });

    it('bounds transcoding: past its time or its queue, 503 unavailable with Retry-After; then it works again', async () => {
      const limits = { timeoutMs: 1, maxQueued: 1, maxPerRequester: 2, idleMs: 1_000 };
      const bounded = new IconStore(databaseRows(), () => base, { codec: new PngCodec(limits) });
      const big = png(1024, 1024).toString('base64');
      const late = await bounded.parse(big, 'create', FIELD, sender()).catch((error: unknown) => error);
      expect(asAnswer(late)).to.deep.equal({
        status: 503,
        headers: { 'Retry-After': '5' },
        body: { success: false, error: { code: 'unavailable', message: 'The icon took too long to process; retry later.' } },
      });

      limits.timeoutMs = 10_000;
      expect(decodePng((await bounded.parse(png(3, 2).toString('base64'), 'create', FIELD, sender())).bytes).width).to.equal(3);
      const [first, , third] = await Promise.allSettled([1, 2, 3].map(() => bounded.parse(big, 'create', FIELD, sender())));
      expect(first!.status).to.equal('fulfilled');
      expect(third!.status).to.equal('rejected');
      expect(asAnswer((third as PromiseRejectedResult).reason)).to.deep.equal({
        status: 503,
        headers: { 'Retry-After': '1' },
        body: { success: false, error: { code: 'unavailable', message: 'Too many icons are being processed; retry shortly.' } },
      });
      expect(await storedIcons()).to.equal(storedBefore);
    });
  });

  describe('save, read and url', () => {
    it('stores one row per icon with its bytes; saving it again marks it as just stored', async () => {
      const icon = await store.parse(png(16, 16, { color: [1, 2, 3] }).toString('base64'), 'create', FIELD, sender());
      await store.saveAlone(icon);
      await sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [icon.sha256]);
      expect((await iconRow(icon.sha256))!.fresh).to.equal(false);
      await store.saveAlone(icon);
      const row = await iconRow(icon.sha256);
      expect(row).to.deep.equal({ size: icon.bytes.length, bytes: icon.bytes, fresh: true });
      expect(await storedIcons()).to.equal(storedBefore + 1);
      expect((await store.read(icon.sha256))!.equals(icon.bytes)).to.equal(true);
    });

    it('makes one row of concurrent saves of the same icon', async () => {
      const icon = await store.parse(png(9, 9, { color: [4, 5, 6] }).toString('base64'), 'create', FIELD, sender());
      const stores = [1, 2, 3, 4].map(() => new IconStore(databaseRows(), () => base));
      await Promise.all(stores.map((each) => each.saveAlone(icon)));
      expect(await count('select count(*)::int from icons where sha256 = ?', [icon.sha256])).to.equal(1);
      expect(await storedIcons()).to.equal(storedBefore + 1);
    });

    it('with a bucket, keeps the bytes there and only the record in the row', async () => {
      const bucket = new MemoryBucket();
      const bucketed = new IconStore(databaseRows(), () => base, { bucket });
      const icon = await bucketed.parse(png(7, 3, { color: [7, 8, 9] }).toString('base64'), 'create', FIELD, sender());
      await bucketed.saveAlone(icon);
      expect(await iconRow(icon.sha256)).to.deep.equal({ size: icon.bytes.length, bytes: null, fresh: true });
      expect([...bucket.objects.keys()]).to.deep.equal([icon.sha256]);
      expect(bucket.objects.get(icon.sha256)!.equals(icon.bytes)).to.equal(true);
      expect((await bucketed.read(icon.sha256))!.equals(icon.bytes)).to.equal(true);
      // The database store does not serve what a bucket holds.
      expect(await store.read(icon.sha256)).to.equal(undefined);
    });

    it('reads through its cache: once per icon, concurrent reads shared, misses never kept, a pruned icon dropped', async () => {
      const real = databaseRows();
      let reads = 0;
      const counting: IconRows = {
        record: (tx, icon, withBytes) => real.record(tx, icon, withBytes),
        bytes: (key) => {
          reads += 1;
          return real.bytes(key);
        },
        prune: (options, removing) => real.prune(options, removing),
        release: (tx, from, keep) => real.release(tx, from, keep),
        transaction: (work) => real.transaction(work),
      };
      const cached = new IconStore(counting, () => base);
      const icon = await cached.parse(png(5, 5, { color: [10, 20, 30] }).toString('base64'), 'create', FIELD, sender());
      await cached.saveAlone(icon);

      const first = await Promise.all([1, 2, 3].map(() => cached.read(icon.sha256)));
      expect(first.every((bytes) => bytes!.equals(icon.bytes))).to.equal(true);
      expect(reads).to.equal(1);
      expect((await cached.read(icon.sha256))!.equals(icon.bytes)).to.equal(true);
      expect(reads).to.equal(1);

      const missing = sha256(randomBytes(16));
      expect(await cached.read(missing)).to.equal(undefined);
      expect(await cached.read(missing)).to.equal(undefined);
      expect(reads).to.equal(3);

      await sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [icon.sha256]);
      const pruned = await cached.prune({ graceMs: 3_600_000, batchSize: 100, maxBatches: 100, stopping: () => false });
      expect(pruned).to.be.at.least(1);
      expect(await iconRow(icon.sha256)).to.equal(undefined);
      expect(await cached.read(icon.sha256)).to.equal(undefined);
      expect(reads).to.equal(4);
    });

    it('shows an icon at the CDN base read at each call, and null for no icon', () => {
      const key = sha256(png(1, 1));
      expect(store.url(key)).to.equal(`http://cdn.test/cdn/icons/${key}.png`);
      base = 'https://cdn.example.com';
      expect(store.url(key)).to.equal(`https://cdn.example.com/icons/${key}.png`);
      expect(store.url(null)).to.equal(null);
      expect(store.url(undefined)).to.equal(null);
    });

    it('takes only 64 lower-case hex characters as a key', async () => {
      const key = sha256(png(1, 1));
      for (const bad of ['../x', key.toUpperCase(), `${key}/../${key}`, key.slice(1), '']) {
        expect(() => store.url(bad)).to.throw();
        for (const attempt of [store.read(bad), store.saveAlone({ bytes: png(1, 1), sha256: bad })]) {
          expect(
            await attempt.then(
              () => 'accepted',
              () => 'refused',
            ),
            bad,
          ).to.equal('refused');
        }
      }
      expect(await storedIcons()).to.equal(storedBefore);
    });
  });

  describe('the read cache', () => {
    const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);

    it('holds at most its bytes, dropping the least recently used first', () => {
      const cache = new IconCache(10);
      cache.set('a', bytes(4, 1));
      cache.set('b', bytes(4, 2));
      expect(cache.get('a')![0]).to.equal(1); // a is now the most recently used
      cache.set('c', bytes(4, 3));
      expect([cache.get('a')?.[0], cache.get('b'), cache.get('c')?.[0]]).to.deep.equal([1, undefined, 3]);
      expect(cache.bytes).to.equal(8);
      cache.set('d', bytes(10, 4));
      expect([cache.get('a'), cache.get('c'), cache.get('d')?.[0]]).to.deep.equal([undefined, undefined, 4]);
      expect(cache.bytes).to.equal(10);
    });

    it('keeps nothing larger than itself, and forgets a deleted key', () => {
      const cache = new IconCache(10);
      cache.set('a', bytes(3, 1));
      cache.set('big', bytes(11, 2));
      expect([cache.get('a')?.[0], cache.get('big')]).to.deep.equal([1, undefined]);
      cache.set('a', bytes(5, 3));
      expect(cache.bytes).to.equal(5);
      cache.delete('a');
      cache.delete('never');
      expect([cache.get('a'), cache.bytes]).to.deep.equal([undefined, 0]);
    });
  });

  describe('a bucket that cannot be reached', () => {
    const UNREACHABLE = { code: 'unavailable', message: 'The icon could not be stored right now; nothing was changed. Retry later.' };

    it('answers a save with 503 unavailable and Retry-After within its bound, recording nothing', async () => {
      const failing = new IconStore(databaseRows(), () => base, { bucket: await unreachableBucket() });
      const icon = await failing.parse(png(6, 6).toString('base64'), 'create', FIELD, sender());
      const started = Date.now();
      const failure = await failing.saveAlone(icon).catch((error: unknown) => error);
      expect(Date.now() - started).to.be.below(2_000);
      expect(asAnswer(failure)).to.deep.equal({
        status: 503,
        headers: { 'Retry-After': '30' },
        body: { success: false, error: UNREACHABLE },
      });
      expect(await iconRow(icon.sha256)).to.equal(undefined);
      const unread = await failing.read(icon.sha256).catch((error: unknown) => error);
      expect(asAnswer(unread)).to.deep.equal({
        status: 503,
        headers: { 'Retry-After': '5' },
        body: { success: false, error: { code: 'unavailable', message: 'The icon could not be read right now; retry later.' } },
      });
    });

    describe('through the project domain, behind the envelope', () => {
      let user: TestUser;
      let server: http.Server;
      let url: string;
      let change: (owner: User) => Promise<unknown>;
      let failing: IconStore;

      before(async () => {
        user = await signUp();
        failing = new IconStore(databaseRows(), () => 'http://cdn.test/cdn', { bucket: await unreachableBucket() });
        const app = new Koa();
        app.silent = true;
        app.use(envelope());
        app.use(async (ctx) => {
          const owner = await database().orm.em.fork().findOneOrFail(User, { id: user.id });
          ctx.state.reply = { status: 200, data: await change(owner) };
        });
        server = app.listen(0, '127.0.0.1');
        await new Promise((resolve) => server.once('listening', resolve));
        url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      });
      after(() => new Promise((resolve) => server.close(resolve)));

      /** A project's fields and how many activity records it has. */
      const PROJECT_STATE = `select p.name, p.namespace, p.icon,
        (select count(*)::int from activity a where a.project_id = p.id) as activity from projects p where p.id = ?`;

      async function expectUnreachable(): Promise<void> {
        const answer = await fetch(url, { method: 'POST' });
        expect(answer.status).to.equal(503);
        expect(answer.headers.get('retry-after')).to.equal('30');
        expect(await answer.json()).to.deep.equal({ success: false, error: UNREACHABLE });
      }

      it('a project created with an icon: 503, no project, no icon recorded', async () => {
        const namespace = namespaceName();
        const sent = png(5, 5, { color: [5, 5, 5] });
        const icon = DATA_URL + sent.toString('base64');
        change = (owner) =>
          createOwnedProject(database().orm.em.fork(), failing, owner, { name: 'Full', namespace, icon }, loadConfig().limits);
        await expectUnreachable();
        expect(await sql('select id from projects where namespace = ?', [namespace])).to.deep.equal([]);
        expect(await iconRow(sha256(storedIcon(sent)))).to.equal(undefined);
        expect(await storedIcons()).to.equal(storedBefore);
      });

      it('a project renamed and re-iconed: 503, nothing changed, no activity recorded, no icon recorded', async () => {
        const project = await createProject(user.token);
        const before = await sql(PROJECT_STATE, [project.id]);
        const sent = png(7, 7);
        change = async (owner) => {
          const em = database().orm.em.fork();
          const row = await em.findOneOrFail(Project, { id: project.id });
          // The icon store fails before anything is queued for webhooks: showing a change is never reached.
          const unreached = () => expect.fail('a refused change queued a webhook delivery');
          const shapes = { member: unreached, project: unreached, insight: unreached, event: unreached };
          return changeProject(em, failing, owner, row, { name: 'Renamed', icon: DATA_URL + sent.toString('base64') }, shapes);
        };
        await expectUnreachable();
        expect(await sql(PROJECT_STATE, [project.id])).to.deep.equal(before);
        expect(await iconRow(sha256(storedIcon(sent)))).to.equal(undefined);
      });
    });
  });

  describe('icons an earlier release left on disk', () => {
    let root: string;
    let dir: string;

    beforeEach(() => {
      root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-disk-icons-'));
      dir = path.join(root, 'icons');
      mkdirSync(dir);
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    /** Writes `name` into the icon folder, last modified `ageMs` ago. */
    function put(name: string, bytes: Buffer | string, ageMs = 0): void {
      writeFileSync(path.join(dir, name), bytes);
      const then = new Date(Date.now() - ageMs);
      utimesSync(path.join(dir, name), then, then);
    }

    it('moves each file that is the icon its name says, leaves anything else, and removes stale temporary files', async () => {
      const [a, b, aside] = [1, 2, 3].map((i) => png(4, i, { color: [i, i, i] }));
      const other = png(3, 3);
      const text = Buffer.from('not a png at all');
      const uuid = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
      put(`${sha256(a!)}.png`, a!, 3_600_000);
      put(`${sha256(b!)}.png`, b!);
      put(`.${sha256(aside!)}.${uuid(1)}.prune`, aside!);
      put(`${sha256(png(5, 5))}.png`, other); // named after other bytes
      put(`${sha256(text)}.png`, text); // the right hash, but no PNG
      put('notes.txt', 'not an icon');
      put(`.${sha256(a!)}.${uuid(2)}.tmp`, 'half written', 5 * 60_000);
      put(`.${sha256(b!)}.${uuid(3)}.tmp`, 'being written');
      mkdirSync(path.join(dir, `${sha256(Buffer.from('a folder'))}.png`));

      const moved = await moveDiskIcons(dir, store, 60_000);
      expect({ ...moved, left: [...moved.left].sort((x, y) => x.file.localeCompare(y.file)) }).to.deep.equal({
        moved: 3,
        removed: 1,
        left: [
          { file: `${sha256(Buffer.from('a folder'))}.png`, reason: 'not a regular file' },
          { file: `${sha256(png(5, 5))}.png`, reason: 'its name is not the SHA-256 of its content' },
          { file: `${sha256(text)}.png`, reason: 'not an icon: is not a PNG image' },
          { file: 'notes.txt', reason: 'not an icon file' },
        ].sort((x, y) => x.file.localeCompare(y.file)),
      });
      expect(readdirSync(dir).sort()).to.deep.equal(
        [
          `${sha256(Buffer.from('a folder'))}.png`,
          `${sha256(png(5, 5))}.png`,
          `${sha256(text)}.png`,
          'notes.txt',
          `.${sha256(b!)}.${uuid(3)}.tmp`,
        ].sort(),
      );
      for (const bytes of [a!, b!, aside!]) {
        expect(await iconRow(sha256(bytes))).to.deep.equal({ size: bytes.length, bytes, fresh: true });
        expect((await store.read(sha256(bytes)))!.equals(bytes)).to.equal(true);
      }
      expect(await storedIcons()).to.equal(storedBefore + 3);

      // Again: nothing left to move, and what was left stays.
      expect(await moveDiskIcons(dir, store, 60_000)).to.deep.include({ moved: 0, removed: 0 });
      expect(readdirSync(dir)).to.have.length(5);
      expect(await storedIcons()).to.equal(storedBefore + 3);
    });

    it('moves the same folder from two stores at once as one, and removes the emptied folder', async () => {
      const icons = [1, 2, 3, 4, 5, 6].map((i) => png(i, 2, { color: [i * 9, 0, 0] }));
      for (const bytes of icons) put(`${sha256(bytes)}.png`, bytes);
      const other = new IconStore(databaseRows(), () => base);
      const [first, second] = await Promise.all([moveDiskIcons(dir, store, 60_000), moveDiskIcons(dir, other, 60_000)]);
      expect(first.moved + second.moved).to.be.within(6, 12);
      expect([...first.left, ...second.left]).to.deep.equal([]);
      expect(existsSync(dir)).to.equal(false);
      for (const bytes of icons) expect(await count('select count(*)::int from icons where sha256 = ?', [sha256(bytes)])).to.equal(1);
      expect(await storedIcons()).to.equal(storedBefore + 6);
      expect(await moveDiskIcons(dir, store, 60_000)).to.deep.equal({ moved: 0, removed: 0, left: [] });
    });

    it('stops at a store that fails, keeping the file for the next run', async () => {
      const bytes = png(2, 9);
      put(`${sha256(bytes)}.png`, bytes);
      const failing = new IconStore(databaseRows(), () => base, { bucket: await unreachableBucket() });
      const failure = await moveDiskIcons(dir, failing, 60_000).catch((error: unknown) => error);
      expect(failure).to.be.instanceOf(Unavailable);
      expect(readdirSync(dir)).to.deep.equal([`${sha256(bytes)}.png`]);
      expect(await iconRow(sha256(bytes))).to.equal(undefined);
    });
  });
});

/**
 * A throwaway Koa app: as the service's, validators (whose 304s the CDN's ETag gets) and the envelope,
 * then the CDN middleware on `store`, and a last middleware that answers 'passed on'.
 */
async function cdnApp(store: Pick<IconStore, 'read'>): Promise<{ server: http.Server; port: number }> {
  const app = new Koa();
  app.silent = true;
  app.use(representations());
  app.use(envelope());
  app.use(cdn(store, { consumeCdn: () => undefined }));
  app.use((ctx) => {
    ctx.body = 'passed on';
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('icon CDN middleware', () => {
  const bytes = png(20, 10, { color: [200, 10, 10] });
  const key = sha256(bytes);
  let server: http.Server;
  let port: number;

  const request = (method: string, rawPath: string, headers: Record<string, string> = {}) => rawRequest(port, method, rawPath, headers);

  before(async () => {
    const store = new IconStore(databaseRows(), () => 'unused');
    await store.saveAlone({ bytes, sha256: key });
    ({ server, port } = await cdnApp(store));
  });

  after(() => new Promise((resolve) => server.close(resolve)));

  it('serves the exact bytes as an immutable PNG with its hash as ETag', async () => {
    const answer = await request('GET', `/cdn/icons/${key}.png`);
    expect(answer.status).to.equal(200);
    expect(answer.body.equals(bytes)).to.equal(true);
    expect(answer.headers['content-type']).to.equal('image/png');
    expect(answer.headers['content-length']).to.equal(String(bytes.length));
    expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    expect(answer.headers.etag).to.equal(`"${key}"`);
    expect(answer.headers['x-content-type-options']).to.equal('nosniff');
  });

  it('answers HEAD with the same headers and no body', async () => {
    const answer = await request('HEAD', `/cdn/icons/${key}.png`);
    expect(answer.status).to.equal(200);
    expect(answer.body.length).to.equal(0);
    expect(answer.headers['content-type']).to.equal('image/png');
    expect(answer.headers['content-length']).to.equal(String(bytes.length));
    expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    expect(answer.headers.etag).to.equal(`"${key}"`);
  });

  it('answers 304 to a matching If-None-Match and 200 to another', async () => {
    for (const method of ['GET', 'HEAD']) {
      for (const tag of [`"${key}"`, `W/"${key}"`, `"other", "${key}"`, '*']) {
        const answer = await request(method, `/cdn/icons/${key}.png`, { 'If-None-Match': tag });
        expect(answer.status, `${method} ${tag}`).to.equal(304);
        expect(answer.body.length).to.equal(0);
        expect(answer.headers.etag).to.equal(`"${key}"`);
        expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
      }
    }
    const stale = await request('GET', `/cdn/icons/${key}.png`, { 'If-None-Match': '"other"' });
    expect(stale.status).to.equal(200);
    expect(stale.body.equals(bytes)).to.equal(true);
  });

  it('answers 404 in the envelope for a missing icon (even to If-None-Match: *), a bad name or a traversal attempt', async () => {
    const missing = sha256(Buffer.from('never stored'));
    expect((await request('GET', `/cdn/icons/${missing}.png`, { 'If-None-Match': '*' })).status).to.equal(404);
    for (const rawPath of [
      `/cdn/icons/${missing}.png`,
      `/cdn/icons/${key.toUpperCase()}.png`,
      `/cdn/icons/${key}.PNG`,
      `/cdn/icons/${key}.gif`,
      `/cdn/icons/${key}`,
      `/cdn/icons/${key}.png/`,
      `/cdn/icons/x/${key}.png`,
      `/cdn/${key}.png`,
      '/cdn/icons/../x',
      '/cdn/icons/../../package.json',
      '/cdn/icons/%2e%2e/%2e%2e/package.json',
      '/cdn/icons/..%2f..%2fpackage.json',
      `/cdn/icons/%2e%2e%2f${key}.png`,
      '/cdn/',
    ]) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await request(method, rawPath);
        expect(answer.status, `${method} ${rawPath}`).to.equal(404);
        if (method === 'GET') {
          expect(JSON.parse(answer.body.toString())).to.deep.equal({ success: false, error: { code: 'not_found', message: 'Not found.' } });
        }
      }
    }
  });

  it('answers 405 with Allow for any other method under /cdn/', async () => {
    for (const [method, rawPath] of [
      ['POST', `/cdn/icons/${key}.png`],
      ['DELETE', `/cdn/icons/${key}.png`],
      ['PUT', '/cdn/other'],
    ]) {
      const answer = await request(method!, rawPath!);
      expect(answer.status, `${method} ${rawPath}`).to.equal(405);
      expect(answer.headers.allow).to.equal('GET, HEAD');
      const json = JSON.parse(answer.body.toString());
      expect(json.success).to.equal(false);
      expect(json.error.code).to.equal('method_not_allowed');
    }
  });

  it('passes on every path outside /cdn/', async () => {
    for (const rawPath of ['/cdn', '/cdnx/icons', `/v1/icons/${key}.png`]) {
      const answer = await request('GET', rawPath);
      expect(answer.status, rawPath).to.equal(200);
      expect(answer.body.toString()).to.equal('passed on');
    }
  });

  it('answers 503 in the envelope, with Retry-After, when the store cannot be read', async () => {
    const unreadable = await cdnApp({
      read: async () => {
        throw new Unavailable('The icon could not be read right now; retry later.', 5);
      },
    });
    try {
      for (const method of ['GET', 'HEAD']) {
        const answer = await rawRequest(unreadable.port, method, `/cdn/icons/${key}.png`, { 'If-None-Match': `"${key}"` });
        expect(answer.status, method).to.equal(503);
        expect(answer.headers['retry-after']).to.equal('5');
        expect(answer.headers['cache-control']).to.equal(undefined);
        if (method === 'GET') {
          expect(JSON.parse(answer.body.toString())).to.deep.equal({
            success: false,
            error: { code: 'unavailable', message: 'The icon could not be read right now; retry later.' },
          });
        }
      }
    } finally {
      await new Promise((resolve) => unreadable.server.close(resolve));
    }
  });
});

describe('icons through the service', () => {
  it('stores and serves a re-encoded icon: the same pixels, keyed by its own SHA-256, without the HTML it carried', async () => {
    const user = await signUp();
    const sample = (x: number, y: number, c: number) => (c === 3 ? 200 : x * 12 + y * c);
    const original = encodePng({ width: 20, height: 10, bitDepth: 8, colourType: 6, sample });
    const sent = Buffer.concat([original.subarray(0, 33), chunk('htMl', HTML), original.subarray(33)]);
    const body = { name: 'Iconic', namespace: namespaceName(), icon: DATA_URL + sent.toString('base64') };
    const project = expectData(await call('POST', '/v1/projects', user.token, body), 201);
    const key = /\/cdn\/icons\/([0-9a-f]{64})\.png$/.exec(project.icon)?.[1];
    expect(project.icon).to.equal(iconUrl(key!));
    expect(await sql('select icon from projects where id = ?', [project.id])).to.deep.equal([{ icon: key }]);

    const answer = await fetch(project.icon);
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('content-type')).to.equal('image/png');
    expect(answer.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable');
    expect(answer.headers.get('etag')).to.equal(`"${key}"`);
    const served = Buffer.from(await answer.arrayBuffer());
    expect(sha256(served)).to.equal(key);
    expect(served.includes('<html')).to.equal(false);
    expect(chunkTypes(served)).to.deep.equal(['IHDR', 'IDAT', 'IEND']);
    expect(decodePng(served).rgba.equals(decodePng(original).rgba)).to.equal(true);
    // The database is the store: the row holds exactly what is served.
    expect(await iconRow(key!)).to.deep.equal({ size: served.length, bytes: served, fresh: true });
    // fetch sends a conditional request with `Cache-Control: no-cache`, which asks caches, not the service, to revalidate.
    const revalidated = await fetch(project.icon, { headers: { 'If-None-Match': `"${key}"` } });
    expect([revalidated.status, (await revalidated.arrayBuffer()).byteLength, revalidated.headers.get('etag')]).to.deep.equal([
      304,
      0,
      `"${key}"`,
    ]);
  });
});
