/**
 * Reads a JSON body for the operations that take one. Only `application/json` is accepted (415
 * otherwise); bodies over 1 MiB are refused from `Content-Length` before a byte is read, or as soon
 * as a chunked body passes the limit (413); malformed JSON is 400.
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

const parse = bodyParser({ enableTypes: ['json'], jsonLimit: BODY_LIMIT_BYTES, encoding: 'utf-8', jsonStrict: true });

export async function readJsonBody(ctx: Context): Promise<unknown> {
  const hasBody = ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
  if (!hasBody) return undefined;
  if (!ctx.is('application/json')) throw new UnsupportedMediaType();
  try {
    await parse(ctx, async () => {});
  } catch (error) {
    const { status, type } = error as { status?: number; type?: string };
    if (status === 413 || type === 'entity.too.large') {
      const close = (ctx.request.length ?? 0) > DROP_LIMIT_BYTES;
      if (!close) dropRest(ctx);
      throw new PayloadTooLarge(close);
    }
    if (status === 415 || type === 'encoding.unsupported' || type === 'charset.unsupported') throw new UnsupportedMediaType();
    throw new InvalidRequest('The body is not valid JSON.', [{ path: '/body', message: 'is not valid JSON' }]);
  }
  return ctx.request.body;
}

function dropRest(ctx: Context): void {
  let dropped = 0;
  ctx.req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DROP_LIMIT_BYTES) ctx.req.socket.destroy();
  });
  ctx.req.resume();
}
