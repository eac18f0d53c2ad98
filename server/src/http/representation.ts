/**
 * What every answer with a body goes through on its way out, once whatever wrote it (the envelope,
 * a static mount, the metrics endpoint) is done, and before the request log and the metrics count
 * it: they see the status as sent, 304 included.
 *
 * - A 200 answer to GET or HEAD with a body carries a strong ETag (conditional.ts), and unless what
 *   wrote it chose otherwise, `Cache-Control: private, no-cache`: most API answers depend on the
 *   caller, so no shared cache may keep them, and a client may keep one but must ask again before
 *   using it, which If-None-Match makes cheap. When If-None-Match names the ETag (or is `*`), the
 *   answer becomes a 304 with the same ETag, Cache-Control and Vary and no body. Errors and other
 *   methods get neither: a validator is only worth having for a representation a client can reuse.
 * - Any answer whose text body is at least COMPRESS_MIN_BYTES goes in the coding Accept-Encoding
 *   asks for (compression.ts), with `Vary: Accept-Encoding`; Koa sets Content-Length from the
 *   bytes actually sent.
 * - A body that is a stream (the live event stream) passes untouched: never buffered, never tagged.
 *
 * A request with neither Accept-Encoding nor If-None-Match pays for one hash of its body, on GET
 * only (the figures are in docs/performance-journal.md). The bytes hashed are the bytes sent: a
 * JSON string that may be compressed (COMPRESS_MIN_BYTES or more) is encoded once, here, since Node
 * would measure, flatten and encode a large string again when writing it; a smaller one is hashed
 * as the UTF-8 bytes Node writes for it and sent as it is, which spares it a Buffer and a second
 * assignment of Koa's body.
 */
import type { Context, Middleware } from 'koa';
import { compressAnswer, compressPrepared, isCompressible, negotiateCoding, type Coding } from './compression.js';
import { codedTag, ifNoneMatchFails, strongTag } from './conditional.js';

/**
 * A body that never changes while the process runs (the contract, the reference page and its
 * assets), prepared once: its bytes, its tag, and each compressed form, made off the event loop
 * when first asked for and then kept in memory.
 */
export class PreparedBody {
  readonly tag: string;
  readonly #encoded = new Map<Exclude<Coding, 'identity'>, Promise<Buffer>>();

  /** `cacheControl`: for a body the same for every caller; without it the API's `private, no-cache` applies. */
  constructor(
    readonly bytes: Buffer,
    readonly type: string,
    readonly cacheControl?: string,
  ) {
    this.tag = strongTag(bytes);
  }

  encoded(coding: Exclude<Coding, 'identity'>): Promise<Buffer> {
    let form = this.#encoded.get(coding);
    if (!form) {
      form = compressPrepared(this.bytes, coding);
      this.#encoded.set(coding, form);
    }
    return form;
  }
}

declare module 'koa' {
  interface DefaultState {
    /** Set by `sendPrepared`: the answer's body with its tag and compressed forms already made. */
    prepared?: PreparedBody;
  }
}

/** Answers `body`; `representations` then takes its tag and compressed forms from it instead of making them. */
export function sendPrepared(ctx: Context, body: PreparedBody): void {
  ctx.state.prepared = body;
  ctx.set('Content-Type', body.type);
  if (body.cacheControl) ctx.set('Cache-Control', body.cacheControl);
  ctx.body = body.bytes;
}

const API_CACHE_CONTROL = 'private, no-cache';

/** Not async: it works in a continuation on `next`'s promise, which it hands on (see envelope.ts: every promise costs every request). */
export function representations(): Middleware {
  return (ctx, next) => next().then(() => represent(ctx));
}

/** The answer's tag, 304 and coding (see the top of this file); a promise only while a prepared body's coding is made. */
function represent(ctx: Context): Promise<void> | undefined {
  const body: unknown = ctx.body;
  const prepared = ctx.state.prepared;
  if (!prepared && typeof body !== 'string' && !Buffer.isBuffer(body)) return; // a stream, or no body
  const validated = ctx.status === 200 && (ctx.method === 'GET' || ctx.method === 'HEAD');
  const type = ctx.res.getHeader('Content-Type');
  const compressible = typeof type === 'string' && isCompressible(type, ctx.response.length ?? 0);
  if (!validated && !compressible) return;

  const bytes = prepared ? prepared.bytes : typeof body === 'string' ? (compressible ? Buffer.from(body) : body) : (body as Buffer);
  const coding = compressible ? negotiateCoding(ctx.get('Accept-Encoding')) : 'identity';
  if (compressible) ctx.vary('Accept-Encoding');
  if (validated) {
    // A mount that knows its body's validator (the icon CDN: the content hash in the name) sets the identity's ETag itself.
    const own = ctx.res.getHeader('ETag');
    const tag = codedTag(prepared?.tag ?? (typeof own === 'string' ? own : strongTag(bytes)), coding);
    ctx.set('ETag', tag);
    if (!ctx.res.hasHeader('Cache-Control')) ctx.set('Cache-Control', API_CACHE_CONTROL);
    if (ifNoneMatchFails(ctx.get('If-None-Match'), tag)) {
      ctx.status = 304; // Koa drops the body, Content-Type and Content-Length
      return;
    }
  }
  if (coding === 'identity') {
    if (body !== bytes) ctx.body = bytes;
    return;
  }
  if (prepared) {
    return prepared.encoded(coding).then((encoded) => {
      ctx.body = encoded;
      ctx.set('Content-Encoding', coding);
    });
  }
  ctx.body = compressAnswer(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes), coding); // compressible: already bytes
  ctx.set('Content-Encoding', coding);
}
