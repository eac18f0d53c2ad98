/**
 * The tests build their icons with the conformance suite's PNG encoder (good, huge or broken images),
 * and with `encodePng` below when a case needs another colour type, bit depth, interlacing or extra
 * chunks. `decodePng` and `chunkTypes` look at what the service stored.
 */
import { deflateSync } from 'node:zlib';
import pngjs from 'pngjs';
import { transcodePng } from '../../server/src/storage/png.js';
import { chunk, ihdr, PNG_SIGNATURE } from '../../tools/src/conformance/png.js';

export * from '../../tools/src/conformance/png.js';

export interface ImageSpec {
  width: number;
  height: number;
  bitDepth: number;
  colourType: number;
  interlaced?: boolean;
  /** Sample `c` of the pixel at (x, y), at most 2^bitDepth − 1. */
  sample(x: number, y: number, c: number): number;
  /** Chunks placed after IHDR, before the image data (PLTE, tRNS, anything). */
  before?: Buffer[];
}

const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };
const ADAM7 = [
  [0, 0, 8, 8],
  [4, 0, 8, 8],
  [0, 4, 4, 8],
  [2, 0, 4, 4],
  [0, 2, 2, 4],
  [1, 0, 2, 2],
  [0, 1, 1, 2],
] as const;

/** The scanlines (filter type None) of the pixels at (x0 + i·dx, y0 + j·dy), packed at the spec's bit depth. */
function scanlines(spec: ImageSpec, x0: number, y0: number, dx: number, dy: number): Buffer[] {
  const channels = CHANNELS[spec.colourType]!;
  const lines: Buffer[] = [];
  for (let y = y0; y < spec.height; y += dy) {
    const xs: number[] = [];
    for (let x = x0; x < spec.width; x += dx) xs.push(x);
    if (xs.length === 0) break;
    const line = Buffer.alloc(1 + Math.ceil((xs.length * channels * spec.bitDepth) / 8));
    let bit = 8;
    for (const x of xs) {
      for (let c = 0; c < channels; c++) {
        const value = spec.sample(x, y, c);
        if (spec.bitDepth === 16) line.writeUInt16BE(value, bit / 8);
        else if (spec.bitDepth === 8) line[bit / 8] = value;
        else line[bit >> 3] = line[bit >> 3]! | (value << (8 - spec.bitDepth - (bit & 7)));
        bit += spec.bitDepth;
      }
    }
    lines.push(line);
  }
  return lines;
}

/** A PNG of any colour type, bit depth and interlacing, with `before` chunks ahead of one IDAT. */
export function encodePng(spec: ImageSpec): Buffer {
  const passes = spec.interlaced ? ADAM7 : ([[0, 0, 1, 1]] as const);
  const raw = Buffer.concat(passes.flatMap(([x0, y0, dx, dy]) => scanlines(spec, x0, y0, dx, dy)));
  return Buffer.concat([
    PNG_SIGNATURE,
    chunk('IHDR', ihdr(spec.width, spec.height, spec.bitDepth, spec.colourType, spec.interlaced ? 1 : 0)),
    ...(spec.before ?? []),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A PNG's chunk types, in order. */
export function chunkTypes(png: Buffer): string[] {
  const types: string[] = [];
  for (let at = PNG_SIGNATURE.length; at < png.length; at += 12 + png.readUInt32BE(at)) types.push(png.toString('latin1', at + 4, at + 8));
  return types;
}

/** A PNG's header fields and its pixels as 8-bit RGBA, by pngjs. */
export function decodePng(png: Buffer): { width: number; height: number; bitDepth: number; colourType: number; rgba: Buffer } {
  const image = pngjs.PNG.sync.read(png);
  return { width: image.width, height: image.height, bitDepth: image.depth, colourType: image.colorType, rgba: image.data };
}

/** The bytes the icon store keeps for an upload of `png`: its re-encoding. */
export function storedIcon(png: Buffer): Buffer {
  return transcodePng(png, 1024).png;
}
