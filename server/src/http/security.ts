/**
 * Headers every answer carries, and CORS. The API serves JSON only, so its answers forbid being
 * sniffed, framed or used as a document that loads anything. CORS is off unless `CORS_ORIGINS`
 * lists the origins allowed to call the API from a browser, and then only the operations the
 * contract marks `x-cors` answer it (spec/cors.tsp: publishing events, what a publish-only token in
 * a web page calls); to every other route a browser on another origin gets what it would with CORS
 * off: no `Access-Control-*` headers, and its preflight the router's 404 or 405.
 */
import type { Middleware } from 'koa';
import type { Contract } from './contract.js';
import type { ContractOperation } from './contract-operation.js';

/** Set on every answer, name and value, straight on Node's response: Koa's `ctx.set` would check each pair's type again. */
const API_HEADERS: [string, string][] = [
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Referrer-Policy', 'no-referrer'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ['Cross-Origin-Resource-Policy', 'same-site'],
];

/** What a page sends to a publishing route: its token, its JSON body, and a key to retry it safely. */
const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key';
const EXPOSED_HEADERS =
  'Idempotent-Replayed, X-Request-Id, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, WWW-Authenticate';

/** Not async: it has nothing to do after `next`, so it hands `next`'s promise on rather than making one of its own. */
export function securityHeaders(): Middleware {
  return (ctx, next) => {
    for (const [name, value] of API_HEADERS) ctx.res.setHeader(name, value);
    return next();
  };
}

/** The operation `method` and `path` route to, if any (the router's 404 and 405 are the dispatch's to answer). */
function routed(contract: Contract, method: string, path: string): ContractOperation | undefined {
  try {
    return contract.match(method, path).op;
  } catch {
    return undefined;
  }
}

/**
 * Undefined when no origin is allowed: there is then nothing to add to any answer. Not async: a
 * request without an allowed `Origin`, or to an operation that is not `x-cors`, is handed on as it
 * came.
 */
export function cors(allowedOrigins: string[], contract: Contract): Middleware | undefined {
  if (allowedOrigins.length === 0) return undefined;
  const allowed = new Set(allowedOrigins);
  return (ctx, next) => {
    const origin = ctx.get('Origin');
    if (!origin) return next();
    const preflight = ctx.method === 'OPTIONS' ? ctx.get('Access-Control-Request-Method') : '';
    const op = routed(contract, preflight || ctx.method, ctx.path);
    if (!op?.cors) return next();
    // The answer of an x-cors operation depends on the origin asking: caches keep one per origin.
    ctx.vary('Origin');
    if (!allowed.has(origin)) return next();
    ctx.set({ 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': EXPOSED_HEADERS });
    if (!preflight) return next();
    ctx.set({
      'Access-Control-Allow-Methods': op.method,
      'Access-Control-Allow-Headers': ALLOWED_HEADERS,
      'Access-Control-Max-Age': '600',
    });
    ctx.status = 204;
    return Promise.resolve();
  };
}
