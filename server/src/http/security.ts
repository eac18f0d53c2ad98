/**
 * Headers every answer carries, and CORS. The API serves JSON only, so its answers forbid being
 * sniffed, framed or used as a document that loads anything. CORS is off unless `CORS_ORIGINS`
 * lists the origins allowed to call the API from a browser.
 */
import type { Middleware } from 'koa';

const API_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'Cross-Origin-Resource-Policy': 'same-site',
};

const ALLOWED_HEADERS = 'Authorization, Content-Type, Last-Event-ID, X-Request-Id';
const EXPOSED_HEADERS = 'X-Request-Id, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, WWW-Authenticate';

export function securityHeaders(): Middleware {
  return async (ctx, next) => {
    ctx.set(API_HEADERS);
    await next();
  };
}

export function cors(allowedOrigins: string[]): Middleware {
  const allowed = new Set(allowedOrigins);
  return async (ctx, next) => {
    const origin = ctx.get('Origin');
    if (allowed.size === 0 || !origin) return next();
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
