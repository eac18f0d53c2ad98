/**
 * The default icon CDN: `GET`/`HEAD /cdn/icons/<sha256>.png` from the icon store (the database or
 * the bucket, through the store's in-memory cache), so that every instance serves every icon.
 * Content is addressed by its hash, so it never changes under a name: cache it for a year and use
 * the hash as the ETag. Anything else under `/cdn/` is 404 (405 for other methods), answered by
 * the envelope; a store that cannot be read is 503. Every request under `/cdn/` counts first
 * against its client address's `CDN_RATE_LIMIT` (429 past it): a miss costs a read of the store too.
 */
import type { Middleware } from 'koa';
import { MethodNotAllowed, NotFound } from '../errors.js';
import { isIconKey, type IconStore } from '../storage/icons.js';
import type { RateLimits } from './rate-limit.js';

/** ctx.path is not percent-decoded, so `%2e%2e` or `%2f` can never match the key's hex. */
const ICON_PATH = /^\/cdn\/icons\/([^/]+)\.png$/;

export function cdn(store: Pick<IconStore, 'read'>, limits: Pick<RateLimits, 'consumeCdn'>): Middleware {
  return async (ctx, next) => {
    if (!ctx.path.startsWith('/cdn/')) return next();
    await limits.consumeCdn(ctx);
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw new MethodNotAllowed(['GET', 'HEAD']);
    const key = ICON_PATH.exec(ctx.path)?.[1];
    if (key === undefined || !isIconKey(key)) throw new NotFound();

    // Read before answering, even a conditional request: an icon that is not stored is 404, never
    // 304. A 200 is turned into a 304 by representation.ts, which compares If-None-Match with this ETag.
    const bytes = await store.read(key);
    if (bytes === undefined) throw new NotFound();
    ctx.set({
      'Cache-Control': 'public, max-age=31536000, immutable',
      ETag: `"${key}"`,
      'X-Content-Type-Options': 'nosniff',
    });
    // Koa answers HEAD with the body's headers (its length) and without the body.
    ctx.body = bytes;
    ctx.type = 'image/png';
  };
}
