/**
 * What an icon may be, checked before any pixel is decoded, and its re-encoding. `inspectPng` walks
 * the chunks (cheap: no inflation) and bounds everything decoding could cost; `transcodePng` then
 * inflates at most the bytes the header's pixels need, decodes with pngjs, and writes a new PNG of
 * IHDR, IDAT and IEND alone. Ancillary chunks (text, animation frames, anything hidden between
 * chunks) never reach the output: an APNG keeps its default image, the one a plain decoder shows.
 */
import { createHash } from 'node:crypto';
import { constants, crc32, inflateSync } from 'node:zlib';
import pngjs from 'pngjs';

/** Why an icon is refused, worded to follow "icon " (InvalidRequest.field prefixes the field's name). */
export class PngRejected extends Error {}

export interface PngHeader {
  width: number;
  height: number;
  bitDepth: number;
  colourType: number;
  interlaced: boolean;
}

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Samples per pixel, and the bit depths the PNG specification allows, by colour type. */
const COLOUR_TYPES = new Map<number, { channels: number; depths: readonly number[] }>([
  [0, { channels: 1, depths: [1, 2, 4, 8, 16] }], // greyscale
  [2, { channels: 3, depths: [8, 16] }], // RGB
  [3, { channels: 1, depths: [1, 2, 4, 8] }], // palette indices
  [4, { channels: 2, depths: [8, 16] }], // greyscale and alpha
  [6, { channels: 4, depths: [8, 16] }], // RGBA
]);

/** Adam7's passes: first column and row, then the steps between them. */
const ADAM7 = [
  [0, 0, 8, 8],
  [4, 0, 8, 8],
  [0, 4, 4, 8],
  [2, 0, 4, 4],
  [0, 2, 2, 4],
  [1, 0, 2, 2],
  [0, 1, 1, 2],
] as const;

/**
 * The exact size of the inflated image data the header describes: each row of each (interlace)
 * pass is a filter byte and its packed samples. This bounds inflation: at most 8,390,528 bytes, for
 * 1024×1024 RGBA at 16 bits, interlaced, the largest image an icon's header may describe.
 */
export function inflatedSize(header: PngHeader): number {
  const bitsPerPixel = COLOUR_TYPES.get(header.colourType)!.channels * header.bitDepth;
  const rows = (width: number, height: number) => (width > 0 && height > 0 ? (Math.ceil((width * bitsPerPixel) / 8) + 1) * height : 0);
  if (!header.interlaced) return rows(header.width, header.height);
  let total = 0;
  for (const [x0, y0, dx, dy] of ADAM7) total += rows(Math.ceil((header.width - x0) / dx), Math.ceil((header.height - y0) / dy));
  return total;
}

function readHeader(bytes: Buffer, maxSide: number): PngHeader {
  if (bytes.length < PNG_SIGNATURE.length || !bytes.subarray(0, 8).equals(PNG_SIGNATURE)) throw new PngRejected('is not a PNG image');
  // The first chunk must be a 13-byte IHDR whose CRC (over type and data) holds.
  if (
    bytes.length < 33 ||
    bytes.readUInt32BE(8) !== 13 ||
    bytes.toString('latin1', 12, 16) !== 'IHDR' ||
    bytes.readUInt32BE(29) !== crc32(bytes.subarray(12, 29))
  ) {
    throw new PngRejected('has an unreadable PNG header');
  }
  const header: PngHeader = {
    width: bytes.readUInt32BE(16),
    height: bytes.readUInt32BE(20),
    bitDepth: bytes[24]!,
    colourType: bytes[25]!,
    interlaced: bytes[28] === 1,
  };
  const { width, height, bitDepth, colourType } = header;
  if (width === 0 || height === 0 || width > maxSide || height > maxSide) {
    throw new PngRejected(`must be from 1×1 to ${maxSide}×${maxSide} pixels, got ${width}×${height}`);
  }
  const colour = COLOUR_TYPES.get(colourType);
  if (!colour) throw new PngRejected(`has an unknown PNG colour type ${colourType}`);
  if (!colour.depths.includes(bitDepth)) {
    throw new PngRejected(`has bit depth ${bitDepth}, which PNG colour type ${colourType} does not allow`);
  }
  if (bytes[26] !== 0 || bytes[27] !== 0 || bytes[28]! > 1) {
    throw new PngRejected('has an unknown PNG compression, filter or interlace method');
  }
  return header;
}

/**
 * Checks the header and the chunk structure, without inflating anything: every chunk whole and
 * with a valid CRC, one PLTE (where the colour type needs one) before the image data, the IDAT
 * chunks consecutive, no critical chunk this decoder does not know, and IEND last with nothing
 * after it. Returns the header and the compressed image data (the IDAT chunks' contents, joined).
 */
export function inspectPng(bytes: Buffer, maxSide: number): { header: PngHeader; data: Buffer } {
  const header = readHeader(bytes, maxSide);
  const idat: Buffer[] = [];
  let palette = false;
  let idatEnded = false;
  for (let at = 33; ;) {
    if (at + 12 > bytes.length) throw new PngRejected('is truncated: the PNG does not end with an IEND chunk');
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const end = at + 12 + length;
    if (end > bytes.length) throw new PngRejected('is truncated: the PNG does not end with an IEND chunk');
    if (!/^[A-Za-z]{4}$/.test(type)) throw new PngRejected('has a malformed PNG chunk (its type is not four letters)');
    if (bytes.readUInt32BE(end - 4) !== crc32(bytes.subarray(at + 4, end - 4))) {
      throw new PngRejected(`has a damaged ${type} chunk (its CRC does not match)`);
    }
    if (idat.length > 0 && type !== 'IDAT') idatEnded = true;
    switch (type) {
      case 'IDAT':
        if (idatEnded) throw new PngRejected('has its IDAT chunks split by other chunks');
        idat.push(bytes.subarray(at + 8, end - 4));
        break;
      case 'PLTE':
        if (palette || idat.length > 0 || header.colourType === 0 || header.colourType === 4) {
          throw new PngRejected('has a misplaced PLTE chunk');
        }
        if (length === 0 || length % 3 !== 0 || length / 3 > 256) throw new PngRejected('has a malformed PLTE chunk');
        palette = true;
        break;
      case 'IEND':
        if (idat.length === 0) throw new PngRejected('has no image data (no IDAT chunk)');
        if (header.colourType === 3 && !palette) throw new PngRejected('has no PLTE chunk, which its palette colour type needs');
        if (end !== bytes.length) throw new PngRejected('has data after its IEND chunk');
        return { header, data: Buffer.concat(idat) };
      case 'IHDR':
        throw new PngRejected('has a second IHDR chunk');
      default:
        // Bit 5 of the first letter (lower case) marks an ancillary chunk, which a decoder may skip.
        if ((bytes[at + 4]! & 0x20) === 0) throw new PngRejected(`has a critical chunk of unknown type ${type}`);
    }
    at = end;
  }
}

/**
 * zlib's own defaults, not pngjs's: pngjs deflates with Z_RLE, which finds runs of one byte only,
 * so an image whose rows repeat, 46 KB as sent, would be stored as its 4 MiB of raw pixels. Level 6
 * rather than 9: on adversarial noise, level 9's longer match search costs the worker 2 s for a few
 * percent fewer bytes, level 6 a tenth of that.
 */
const DEFLATE = { deflateLevel: 6, deflateStrategy: constants.Z_DEFAULT_STRATEGY };

export interface Transcoded {
  png: Buffer;
  sha256: string;
}

/**
 * Decodes a PNG that `inspectPng` accepts and encodes its pixels again (8-bit RGB, or RGBA when any
 * pixel is not opaque). Inflation is capped at `inflatedSize`, and the data must fill it exactly,
 * before pngjs sees the image: pngjs inflates interlaced images without a cap of its own.
 */
export function transcodePng(bytes: Buffer, maxSide: number): Transcoded {
  const { header, data } = inspectPng(bytes, maxSide);
  const expected = inflatedSize(header);
  let inflated: Buffer;
  try {
    inflated = inflateSync(data, { maxOutputLength: expected });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new PngRejected(`has more image data than ${header.width}×${header.height} pixels hold`);
    }
    throw new PngRejected('has damaged image data (it does not inflate)');
  }
  if (inflated.length !== expected) throw new PngRejected(`has less image data than ${header.width}×${header.height} pixels need`);

  let image: { width: number; height: number; data: Buffer };
  try {
    image = pngjs.PNG.sync.read(bytes);
  } catch {
    throw new PngRejected('could not be decoded as a PNG image');
  }
  let opaque = true;
  for (let i = 3; i < image.data.length && opaque; i += 4) opaque = image.data[i] === 255;
  // Only the pixels go to the encoder: given the decoded metadata it would write a gAMA chunk too.
  const pixels = { width: image.width, height: image.height, data: image.data } as pngjs.PNG;
  const png = pngjs.PNG.sync.write(pixels, { colorType: opaque ? 2 : 6, inputColorType: 6, inputHasAlpha: true, ...DEFLATE });
  return { png, sha256: createHash('sha256').update(png).digest('hex') };
}
