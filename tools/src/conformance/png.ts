/** A tiny PNG encoder: icons of exactly the kind a case needs (the tests use it too). */
import { crc32, deflateSync } from 'node:zlib';

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** One chunk: length, type, data, and the CRC over type and data. */
export function chunk(type: string, data: Buffer): Buffer {
  const typeBytes = Buffer.from(type, 'latin1');
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([typeBytes, data])));
  return Buffer.concat([length, typeBytes, data, crc]);
}

/** The 13 bytes of an IHDR chunk's data (compression and filter method 0); any field may hold a value the specification forbids. */
export function ihdr(width: number, height: number, bitDepth: number, colourType: number, interlace = 0): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([bitDepth, colourType, 0, 0, interlace], 8);
  return header;
}

/** An RGB, 8-bit, single-colour image. Any size is encoded, 0 or over 1024 included, for refusal tests. */
export function png(width: number, height: number, opts: { color?: [number, number, number] } = {}): Buffer {
  const header = ihdr(width, height, 8, 2); // 8-bit RGB, not interlaced
  const row = Buffer.alloc(1 + width * 3); // leading 0: filter type None
  for (let x = 0; x < width; x++) row.set(opts.color ?? [0x2a, 0x7f, 0xd4], 1 + x * 3);
  const pixels = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([PNG_SIGNATURE, chunk('IHDR', header), chunk('IDAT', deflateSync(pixels)), chunk('IEND', Buffer.alloc(0))]);
}

/**
 * A valid 16×16 PNG of exactly `minBytes` (or its natural size if larger), padded with a tEXt chunk
 * (an ancillary chunk decoders skip): big in bytes, small in pixels.
 */
export function pngOfSize(minBytes: number): Buffer {
  const base = png(16, 16);
  const keyword = Buffer.from('Comment\0', 'latin1');
  const padding = Math.max(0, minBytes - base.length - 12 - keyword.length);
  const text = chunk('tEXt', Buffer.concat([keyword, Buffer.alloc(padding, 'x')]));
  const afterHeader = PNG_SIGNATURE.length + 25; // signature, then the 25-byte IHDR chunk
  return Buffer.concat([base.subarray(0, afterHeader), text, base.subarray(afterHeader)]);
}

/** The start of a GIF: an image, but not a PNG. */
export const notPng: Buffer = Buffer.from('GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00;', 'latin1');
