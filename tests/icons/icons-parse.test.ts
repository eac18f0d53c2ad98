/**
 * The icon store's parse of what a client sends, on the run's database: every refusal (and that it
 * stores nothing), hostile images (HTML in a PNG, impossible headers, zlib bombs, animations), what is
 * kept (a re-encoding: IHDR, IDAT and IEND, the same pixels), and bounded transcoding.
 */
import { expect } from 'chai';
import { deflateSync } from 'node:zlib';
import { InvalidRequest } from '../../server/src/errors.js';
import { IconStore } from '../../server/src/storage/icons.js';
import { PngCodec } from '../../server/src/storage/png-codec.js';
import { sha256 } from '../support/harness.js';
import { chunk, chunkTypes, decodePng, encodePng, ihdr, notPng, png, PNG_SIGNATURE, pngOfSize, type ImageSpec } from '../support/png.js';
import { asAnswer, DATA_URL, databaseRows, FIELD, freshIconStore, HTML, sender, storedIcons } from './icons-support.js';

const IEND = chunk('IEND', Buffer.alloc(0));

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

describe('icon store', () => {
  let base: string;
  let store: IconStore;
  let storedBefore: number;
  beforeEach(async () => ({ base, store, storedBefore } = await freshIconStore(() => base)));

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
});
