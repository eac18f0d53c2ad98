/**
 * Reads request bodies. Only `application/json` is accepted (415 otherwise). A body over its limit
 * is refused from `Content-Length` before a byte is read, or as soon as a chunked body passes the
 * limit (413). `readJsonBody` parses (malformed JSON is 400); `readRawBody` gives the bytes as
 * received, for an operation that must check them before anything parses them (the Stripe
 * webhook's signature).
 *
 * A body the answer leaves unread (a 413, a GET that carries one, any refusal made before the body is
 * read: 401, 404, 405, 415, 429...) is read and dropped, up to 8 MiB (`dropUnreadBodies`), because a
 * connection closed while its client is still sending is reset under that client: the kernel
 * discards what the client had not yet read of the answer, and the client sees ECONNRESET or EPIPE
 * instead of it. So a client still sending can finish and read the answer, and a kept-alive
 * connection can carry its next request. A body declared or sent past 8 MiB is cut off by closing
 * the connection.
 */
import { bodyParser } from '@koa/bodyparser';
import type { Context, Middleware } from 'koa';
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
    if (status === 413 || type === 'entity.too.large') throw new PayloadTooLarge(BODY_LIMIT_BYTES);
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
  if ((ctx.request.length ?? 0) > limitBytes) throw new PayloadTooLarge(limitBytes);
  const chunks: Buffer[] = [];
  let size = 0;
  return new Promise((resolve, reject) => {
    const req = ctx.req;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        stop();
        reject(new PayloadTooLarge(limitBytes));
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

/**
 * Middleware, outermost, so that it runs once the answer is decided and before Koa writes it: the
 * part of the request's body that nothing read is read and dropped (see above).
 *
 * On a connection kept alive, the answer goes at once, while the rest of the body is still
 * arriving: a client may stop sending when it sees a 413, and one that declared a body it holds
 * back gets its answer. On a connection that closes after this answer (the client sent
 * `Connection: close` or spoke HTTP/1.0, or the service is shutting down), closing while the
 * client still sends would reset the connection under the answer, so the answer waits while the
 * body keeps coming: until it is in, or nothing has come for LINGER_IDLE_MS (a client holding its
 * body back), within the server's request timeout.
 */
export function dropUnreadBodies(): Middleware {
  // A request that declares no body has nothing to drop: it passes through without a promise of
  // its own here (every promise costs every request; see envelope.ts).
  return (ctx, next) => (hasBody(ctx) ? dropAfter(ctx, next) : next());
}

async function dropAfter(ctx: Context, next: () => Promise<unknown>): Promise<void> {
  await next();
  const req = ctx.req;
  if (req.readableEnded || req.destroyed || ctx.headerSent) return;
  if ((ctx.request.length ?? 0) > DROP_LIMIT_BYTES) {
    ctx.set('Connection', 'close');
    return;
  }
  const closes = !ctx.res.shouldKeepAlive || /\bclose\b/i.test(ctx.response.get('Connection'));
  const received = dropRest(ctx, closes ? LINGER_IDLE_MS : undefined);
  if (closes) await received;
}

const LINGER_IDLE_MS = 1_000;

/**
 * Reads the rest of the body and drops it. Settles once it has all arrived, or the connection is
 * gone, or nothing has arrived for `idleMs` (when given), or DROP_LIMIT_BYTES have been dropped: the
 * connection is then closed, at once if the answer has been sent and after it otherwise.
 */
function dropRest(ctx: Context, idleMs?: number): Promise<void> {
  const req = ctx.req;
  return new Promise((resolve) => {
    let dropped = 0;
    let idle: NodeJS.Timeout | undefined;
    const wait = () => {
      if (idleMs === undefined) return;
      clearTimeout(idle);
      idle = setTimeout(settle, idleMs);
    };
    const onData = (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped <= DROP_LIMIT_BYTES) return wait();
      if (ctx.res.headersSent) req.socket.destroy();
      else ctx.set('Connection', 'close');
      settle();
    };
    const settle = () => {
      clearTimeout(idle);
      req.off('data', onData).off('end', settle).off('close', settle).off('error', settle);
      resolve();
    };
    req.on('data', onData).on('end', settle).on('close', settle).on('error', settle);
    req.resume();
    wait();
  });
}
