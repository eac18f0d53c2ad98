/**
 * Reads a JSON body for the operations that take one. Only `application/json` is accepted (415
 * otherwise); bodies over 1 MiB are refused from `Content-Length` before a byte is read, or as soon
 * as a chunked body passes the limit (413); malformed JSON is 400.
 */
import { bodyParser } from '@koa/bodyparser';
import type { Context } from 'koa';
import { InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from '../errors.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;

const parse = bodyParser({ enableTypes: ['json'], jsonLimit: BODY_LIMIT_BYTES, encoding: 'utf-8', jsonStrict: true });

export async function readJsonBody(ctx: Context): Promise<unknown> {
  const hasBody = ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
  if (!hasBody) return undefined;
  if (!ctx.is('application/json')) throw new UnsupportedMediaType();
  try {
    await parse(ctx, async () => {});
  } catch (error) {
    const { status, type } = error as { status?: number; type?: string };
    if (status === 413 || type === 'entity.too.large') throw new PayloadTooLarge();
    if (status === 415 || type === 'encoding.unsupported' || type === 'charset.unsupported') throw new UnsupportedMediaType();
    throw new InvalidRequest('The body is not valid JSON.', [{ path: '/body', message: 'is not valid JSON' }]);
  }
  return ctx.request.body;
}
