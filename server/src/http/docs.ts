/**
 * Where a person who opens the service's address lands: `GET /` answers, in the envelope, where the
 * API (`/v1`), its reference page and its contract are. And the API reference page at `/docs`: Redoc rendering `/v1/openapi.json`, with every asset served
 * by the service itself from the `redoc` npm package, so the page works offline. The page's CSP
 * allows only this origin's scripts (Redoc styles inline and searches in a blob worker).
 *
 * Every answer here is a body prepared once (representation.ts): tagged, compressed when first
 * asked for in a coding, then served from memory. Redoc's 1.1 MB bundle is read on its first
 * request, not at start; it may be cached for a day, the others are revalidated on every use.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Middleware } from 'koa';
import { JSON_TYPE } from './envelope.js';
import { PreparedBody, sendPrepared } from './representation.js';

const redocBundle = path.join(path.dirname(createRequire(import.meta.url).resolve('redoc/package.json')), 'bundles/redoc.standalone.js');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Signalboard API reference</title>
</head>
<body>
<div id="redoc"></div>
<script src="/docs/redoc.standalone.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

const INIT = `Redoc.init('/v1/openapi.json', { hideHostname: false, expandResponses: '200,201' }, document.getElementById('redoc'));\n`;

const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  'worker-src blob:',
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const HOME = {
  success: true,
  data: {
    message: 'Signalboard. The API is at /v1, its reference at /docs, its contract at /v1/openapi.json.',
    api: '/v1',
    reference: '/docs',
    contract: '/v1/openapi.json',
  },
};

const REVALIDATE = 'no-cache';
const JAVASCRIPT = 'text/javascript; charset=utf-8';

const home = new PreparedBody(Buffer.from(JSON.stringify(HOME)), JSON_TYPE, REVALIDATE);
const page = new PreparedBody(Buffer.from(PAGE), 'text/html; charset=utf-8', REVALIDATE);
const init = new PreparedBody(Buffer.from(INIT), JAVASCRIPT, REVALIDATE);

let bundle: Promise<PreparedBody> | undefined;

/** Redoc's bundle, read once; a failed read is tried again on the next request. */
function redoc(): Promise<PreparedBody> {
  bundle ??= readFile(redocBundle).then(
    (bytes) => new PreparedBody(bytes, JAVASCRIPT, 'public, max-age=86400'),
    (error: unknown) => {
      bundle = undefined;
      throw error;
    },
  );
  return bundle;
}

export function docs(): Middleware {
  return async (ctx, next) => {
    if (ctx.path !== '/' && ctx.path !== '/docs' && !ctx.path.startsWith('/docs/')) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    switch (ctx.path) {
      case '/':
        sendPrepared(ctx, home);
        return;
      case '/docs':
        ctx.set('Content-Security-Policy', DOCS_CSP);
        sendPrepared(ctx, page);
        return;
      case '/docs/init.js':
        sendPrepared(ctx, init);
        return;
      case '/docs/redoc.standalone.js':
        sendPrepared(ctx, await redoc());
        return;
      default:
        return next();
    }
  };
}
