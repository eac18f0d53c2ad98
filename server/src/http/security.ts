/**
 * Headers every answer carries, and CORS. The API serves JSON only, so its answers forbid being
 * sniffed, framed or used as a document that loads anything. CORS is off unless `CORS_ORIGINS`
 * lists the origins allowed to call the API from a browser.
 */
import type { Middleware } from 'koa';

/** Set on every answer, name and value, straight on Node's response: Koa's `ctx.set` would check each pair's type again. */
const API_HEADERS: [string, string][] = [
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Referrer-Policy', 'no-referrer'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ['Cross-Origin-Resource-Policy', 'same-site'],
];

const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key, If-None-Match, Last-Event-ID, X-Request-Id';
const EXPOSED_HEADERS =
  'ETag, Idempotent-Replayed, X-Request-Id, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, WWW-Authenticate';

/** Not async: it has nothing to do after `next`, so it hands `next`'s promise on rather than making one of its own. */
export function securityHeaders(): Middleware {
  return (ctx, next) => {
    for (const [name, value] of API_HEADERS) ctx.res.setHeader(name, value);
    return next();
  };
}

/** Undefined when no origin is allowed: there is then nothing to add to any answer. */
export function cors(allowedOrigins: string[]): Middleware | undefined {
  if (allowedOrigins.length === 0) return undefined;
  const allowed = new Set(allowedOrigins);
  return async (ctx, next) => {
    const origin = ctx.get('Origin');
    if (!origin) return next();
    ctx.vary('Origin');
    if (!allowed.has(origin)) return next();
    ctx.set({ 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': EXPOSED_HEADERS });
    if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
      ctx.set({
        'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE',
        'Access-Control-Allow-Headers': ALLOWED_HEADERS,
        'Access-Control-Max-Age': '600',
      });
      ctx.status = 204;
      return;
    }
    await next();
  };
}
