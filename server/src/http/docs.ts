/**
 * Where a person who opens the service's address lands: `GET /` answers, in the envelope, where the
 * API (`/v1`), its reference page and its contract are. And the API reference page at `/docs`: Redoc rendering `/v1/openapi.json`, with every asset served
 * by the service itself from the `redoc` npm package, so the page works offline. The page's CSP
 * allows only this origin's scripts (Redoc styles inline and searches in a blob worker).
 */
import { createReadStream } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Middleware } from 'koa';

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

export function docs(): Middleware {
  return async (ctx, next) => {
    if (ctx.path !== '/' && ctx.path !== '/docs' && !ctx.path.startsWith('/docs/')) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    switch (ctx.path) {
      case '/':
        ctx.body = HOME;
        return;
      case '/docs':
        ctx.set('Content-Security-Policy', DOCS_CSP);
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = PAGE;
        return;
      case '/docs/init.js':
        ctx.type = 'text/javascript; charset=utf-8';
        ctx.body = INIT;
        return;
      case '/docs/redoc.standalone.js':
        ctx.type = 'text/javascript; charset=utf-8';
        ctx.set('Cache-Control', 'public, max-age=86400');
        ctx.body = createReadStream(redocBundle);
        return;
      default:
        return next();
    }
  };
}
