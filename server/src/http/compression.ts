/**
 * Content codings: which one an answer is sent in, and the compression itself. The service offers
 * `br` and `gzip` for text bodies of at least COMPRESS_MIN_BYTES; a smaller body, an image or an
 * event stream has one form only, identity. Answers are compressed on the event loop at a low
 * effort (a dynamic answer is compressed once per request, so CPU per byte saved decides); bodies
 * prepared once (the contract, the reference's assets) are compressed off it at a high effort.
 * The figures behind the levels are in docs/performance-journal.md.
 */
import { promisify } from 'node:util';
import zlib from 'node:zlib';

/** The codings offered; identity is the body as it is. */
export type Coding = 'br' | 'gzip' | 'identity';

/** Below this, a coding's framing and the CPU cost more than the bytes saved. */
export const COMPRESS_MIN_BYTES = 1024;

/**
 * Text types: JSON, HTML, JavaScript, CSS, SVG, Prometheus' text format. Never `text/event-stream`,
 * which is a stream (never buffered).
 */
const COMPRESSIBLE = /^(?:application\/json|image\/svg\+xml|text\/(?:html|javascript|plain|css))\b/i;

/** Whether a body of this type and size has encoded forms at all; only then does its answer vary with Accept-Encoding. */
export function isCompressible(type: string, bytes: number): boolean {
  return bytes >= COMPRESS_MIN_BYTES && COMPRESSIBLE.test(type);
}

/**
 * The coding to send, from the request's Accept-Encoding (RFC 9110 §12.5.3): the acceptable one
 * (q > 0) with the highest q among br, gzip and identity; on a tie br (smaller, for similar CPU at
 * the levels below), then gzip, then identity. A coding the field does not name takes the q of `*`
 * if given, else is not acceptable. Identity not named (nor `*`) is what remains when nothing else
 * is acceptable: a client that lists `gzip;q=0.5` alone wants gzip. Without the field, or when
 * nothing offered is acceptable (`identity;q=0` alone), the answer goes as it is: the RFC's advice,
 * and never a 406 the contract does not document. An entry with a malformed q is ignored.
 */
export function negotiateCoding(acceptEncoding: string | undefined): Coding {
  if (!acceptEncoding) return 'identity';
  let br: number | undefined;
  let gzip: number | undefined;
  let identity: number | undefined;
  let any: number | undefined;
  for (const entry of acceptEncoding.split(',')) {
    const [name = '', ...params] = entry.split(';');
    const q = qualityOf(params);
    if (q === undefined) continue;
    switch (name.trim().toLowerCase()) {
      case 'br':
        br = q;
        break;
      case 'gzip':
      case 'x-gzip':
        gzip = q;
        break;
      case 'identity':
        identity = q;
        break;
      case '*':
        any = q;
        break;
    }
  }
  const weights: [Coding, number][] = [
    ['br', br ?? any ?? 0],
    ['gzip', gzip ?? any ?? 0],
    ['identity', identity ?? any ?? 0],
  ];
  let best: Coding = 'identity';
  let bestQ = 0;
  for (const [coding, q] of weights) {
    if (q > bestQ) [best, bestQ] = [coding, q];
  }
  return best;
}

const QVALUE = /^\s*q\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)\s*$/i;

/** An entry's weight: 1 without a `q` parameter, undefined when its `q` is not a qvalue. */
function qualityOf(params: string[]): number | undefined {
  for (const param of params) {
    if (!/^\s*q\s*=/i.test(param)) continue;
    const value = QVALUE.exec(param)?.[1];
    return value === undefined ? undefined : Number(value);
  }
  return 1;
}

/** Effort for an answer compressed per request: brotli 2 and gzip 1, the cheapest per byte saved on the answers measured (docs/performance-journal.md#compression). */
const PER_REQUEST = { brotli: 2, gzip: 1 };
/** Effort for a body compressed once per process: brotli 9 and gzip 9 (brotli 10–11 took 7–13× as long for 2–8 % fewer bytes). */
const PREPARED = { brotli: 9, gzip: 9 };

function options(coding: Exclude<Coding, 'identity'>, effort: typeof PER_REQUEST, bytes: Buffer): zlib.BrotliOptions | zlib.ZlibOptions {
  return coding === 'br'
    ? { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: effort.brotli, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } }
    : { level: effort.gzip };
}

/** An answer's body in `coding`, now, on the event loop: cheaper in total CPU than a round trip to the thread pool for the sizes answers have. */
export function compressAnswer(bytes: Buffer, coding: Exclude<Coding, 'identity'>): Buffer {
  return coding === 'br'
    ? zlib.brotliCompressSync(bytes, options(coding, PER_REQUEST, bytes))
    : zlib.gzipSync(bytes, options(coding, PER_REQUEST, bytes));
}

const brotliAsync = promisify(zlib.brotliCompress);
const gzipAsync = promisify(zlib.gzip);

/** A prepared body in `coding`, on the thread pool: at this effort a 1 MiB script takes a quarter of a second, which the event loop must not wait out. */
export function compressPrepared(bytes: Buffer, coding: Exclude<Coding, 'identity'>): Promise<Buffer> {
  return coding === 'br' ? brotliAsync(bytes, options(coding, PREPARED, bytes)) : gzipAsync(bytes, options(coding, PREPARED, bytes));
}
