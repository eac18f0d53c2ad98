/**
 * Reads request bodies. Only `application/json` is accepted (415 otherwise). A body over its limit
 * is refused from `Content-Length` before a byte is read, or as soon as a chunked body passes the
 * limit (413). `readJsonBody` parses (malformed JSON is 400); `readRawBody` gives the bytes as
 * received, for an operation that must check them before anything parses them (the Stripe
 * webhook's signature).
 *
 * After a 413 the rest of the body is read and dropped, up to 8 MiB: a client still sending it can
 * finish and read the answer (a connection closed with unread bytes is reset under the client,
 * which then sees EPIPE instead of the 413), and the connection can carry its next request. A body
 * declared or sent past that is cut off by closing the connection.
 */
import { bodyParser } from '@koa/bodyparser';
import type { Context } from 'koa';
import { InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from '../errors.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;
const DROP_LIMIT_BYTES = 8 * BODY_LIMIT_BYTES;

// DELETE too: an account's delete carries its password in the body (the parser skips DELETE by default).
const parse = bodyParser({
  enableTypes: ['json'],
  jsonLimit: BODY_LIMIT_BYTES,
  encoding: 'utf-8',
  jsonStrict: true,
  parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'],
});

function hasBody(ctx: Context): boolean {
  return ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
}

export async function readJsonBody(ctx: Context): Promise<unknown> {
  if (!hasBody(ctx)) return undefined;
  if (!ctx.is('application/json')) throw new UnsupportedMediaType();
  try {
    await parse(ctx, async () => {});
  } catch (error) {
    const { status, type } = error as { status?: number; type?: string };
    if (status === 413 || type === 'entity.too.large') throw tooLarge(ctx, BODY_LIMIT_BYTES);
    if (status === 415 || type === 'encoding.unsupported' || type === 'charset.unsupported') throw new UnsupportedMediaType();
    throw new InvalidRequest('The body is not valid JSON.', [{ path: '/body', message: 'is not valid JSON' }]);
  }
  return ctx.request.body;
}

/**
 * The body's bytes, unparsed and undecoded, at most `limitBytes` of them; empty when there is no
 * body. UTF-8 JSON only, as `readJsonBody` takes, but with no content coding (which `readJsonBody`
 * inflates): the bytes must be the ones their sender signed.
 */
export async function readRawBody(ctx: Context, limitBytes: number): Promise<Buffer> {
  if (!hasBody(ctx)) return Buffer.alloc(0);
  const charset = ctx.request.charset.toLowerCase();
  const coding = ctx.get('Content-Encoding').toLowerCase();
  const json = ctx.is('application/json') && (!charset || charset === 'utf-8') && (!coding || coding === 'identity');
  if (!json) throw new UnsupportedMediaType();
  if ((ctx.request.length ?? 0) > limitBytes) throw tooLarge(ctx, limitBytes);
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise((resolve, reject) => {
    const req = ctx.req;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        stop();
        reject(tooLarge(ctx, limitBytes));
      } else chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks, size));
    };
    const onAborted = () => {
      stop();
      reject(new InvalidRequest('The body ended before it was complete.', [{ path: '/body', message: 'is incomplete' }]));
    };
    const stop = () => {
      req.off('data', onData).off('end', onEnd).off('aborted', onAborted).off('error', onAborted);
    };
    req.on('data', onData).on('end', onEnd).on('aborted', onAborted).on('error', onAborted);
  });
}

/** The 413 for a body past `limitBytes`, with the rest of the body dropped or the connection closed (see above). */
function tooLarge(ctx: Context, limitBytes: number): PayloadTooLarge {
  const close = (ctx.request.length ?? 0) > DROP_LIMIT_BYTES;
  if (!close) dropRest(ctx);
  return new PayloadTooLarge(close, limitBytes);
}

function dropRest(ctx: Context): void {
  let dropped = 0;
  ctx.req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DROP_LIMIT_BYTES) ctx.req.socket.destroy();
  });
  ctx.req.resume();
}
