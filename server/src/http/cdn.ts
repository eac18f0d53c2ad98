/**
 * The default icon CDN: `GET`/`HEAD /cdn/icons/<sha256>.png` from the icon store's folder. Content
 * is addressed by its hash, so it never changes under a name: cache it for a year and use the hash
 * as the ETag. Anything else under `/cdn/` is 404 (405 for other methods), answered by the envelope.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Middleware } from 'koa';
import { MethodNotAllowed, NotFound } from '../errors.js';
import { isIconKey, type IconStore } from '../storage/icons.js';

/** ctx.path is not percent-decoded, so `%2e%2e` or `%2f` can never match the key's hex. */
const ICON_PATH = /^\/cdn\/icons\/([^/]+)\.png$/;

async function openIcon(file: string): Promise<FileHandle> {
  try {
    return await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFound();
    throw error;
  }
}

export function cdn(store: IconStore): Middleware {
  return async (ctx, next) => {
    if (!ctx.path.startsWith('/cdn/')) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw new MethodNotAllowed(['GET', 'HEAD']);
    const key = ICON_PATH.exec(ctx.path)?.[1];
    if (key === undefined || !isIconKey(key)) throw new NotFound();

    // Opened before answering: a concurrent prune (which moves the file aside, then removes it) cannot break the stream half-way.
    const handle = await openIcon(store.file(key));
    let streaming = false;
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new NotFound();
      ctx.status = 200; // ctx.fresh compares validators only on a 2xx answer
      ctx.set({
        'Cache-Control': 'public, max-age=31536000, immutable',
        ETag: `"${key}"`,
        'X-Content-Type-Options': 'nosniff',
      });
      if (ctx.fresh) {
        ctx.status = 304;
        return;
      }
      ctx.type = 'image/png';
      if (ctx.method === 'GET') {
        ctx.body = handle.createReadStream(); // closes the handle when done; Koa destroys it on abort
        streaming = true;
      }
      ctx.length = stat.size;
    } finally {
      if (!streaming) await handle.close();
    }
  };
}
