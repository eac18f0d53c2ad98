/**
 * The web console (`console/`, a single-page app) served by the service, on the API's own origin,
 * from its build folder (`console/dist`, or `CONSOLE_DIR`): an `index.html` and hashed files under
 * `assets/`.
 *
 * - `GET /assets/<file>`: a file the folder held at start, with its content type, cached for a year
 *   (`public, max-age=31536000, immutable`: a build names each file after its content). Anything
 *   else under `/assets/` is 404 in the envelope (405 for other methods). Files are looked up by
 *   exact name among those listed at start, never by joining the request's path to the folder, so
 *   no `..`, encoded `%2e%2e`, NUL or symbolic link reaches outside it.
 * - The console's pages (`/`, `/signup`, `/login`, `/reset-password`, `/projects`, `/projects/…`,
 *   `/account`) answer `index.html` with `Cache-Control: no-cache` and the console's CSP, when the
 *   request is a browser's navigation: its `Accept` ranks `text/html` above `application/json`. Any
 *   other request (`Accept: application/json`, curl's catch-all range, no `Accept`) goes on as
 *   before: `GET /` answers the service's JSON index, the other pages 404. Those answers vary with
 *   `Accept`.
 * - Without `index.html` in the folder at start (the console not built), nothing here answers, and
 *   the service says so once, as a warning.
 *
 * Bodies are read once and kept (a build is a few hundred KB), prepared as representation.ts does
 * the reference page's: tagged, and compressed in `br` or `gzip` when first asked for, off the
 * event loop. A build that changes while the service runs is seen at its next start.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context, Next } from 'koa';
import { MethodNotAllowed, NotFound } from '../errors.js';
import type { Logger } from '../logger.js';
import { PreparedBody, sendPrepared } from './representation.js';
import { requestOrigin } from './session-cookie.js';

/**
 * The console built beside the service: `console/dist` at the repository's root, which is three
 * folders above this module's sources (`server/src/http/`) and four above its compiled form
 * (`dist/server/src/http/`, in the repository and in the installed `@signalboard/server` package,
 * whose `console/dist` its `prepack` copies in).
 */
export function defaultConsoleDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const compiled = import.meta.url.endsWith('.js');
  return path.resolve(here, compiled ? '../../../..' : '../../..', 'console', 'dist');
}

const ASSET_PREFIX = '/assets/';

/** The client-side routes of the console, which all answer its `index.html`. */
const PAGES = new Set(['/', '/signup', '/login', '/reset-password', '/projects', '/account']);

/** Whether `requestPath` is the console's: one of its files, or one of its pages. */
export function isConsolePath(requestPath: string): boolean {
  return requestPath.startsWith(ASSET_PREFIX) || PAGES.has(requestPath) || requestPath.startsWith('/projects/');
}

/** By extension; anything else is sent as bytes. */
const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.wasm': 'application/wasm',
};

const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * The console's Content-Security-Policy: its own scripts, styles, fonts and API calls only; images
 * also from `data:` and `blob:` (icons being picked) and from the icons' address when that is
 * another origin (`CDN_URL`); no inline script, no `eval`, no plugins, no `<base>`, forms posted
 * only here, and never framed.
 */
export function consoleCsp(iconsOrigin: string | undefined): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' data: blob:${iconsOrigin ? ` ${iconsOrigin}` : ''}`,
    "connect-src 'self'",
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The weight `accept` gives `type` (RFC 9110 §12.5.1): its most specific matching range's q; 0 when none matches. */
function weightOf(accept: string, type: string): number {
  const [major] = type.split('/');
  let best = -1;
  let weight = 0;
  for (const entry of accept.split(',')) {
    const [range = '', ...params] = entry.split(';');
    const name = range.trim().toLowerCase();
    const specificity = name === type ? 2 : name === `${major}/*` ? 1 : name === '*/*' ? 0 : -1;
    if (specificity <= best) continue;
    const q = params.map((p) => /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
    best = specificity;
    weight = q === undefined ? 1 : Number(q);
  }
  return weight;
}

/** A browser's navigation: `Accept` ranks `text/html` strictly above `application/json` (a catch-all range alone, or no `Accept`, is JSON). */
export function prefersHtml(accept: string): boolean {
  return accept !== '' && weightOf(accept, 'text/html') > weightOf(accept, 'application/json');
}

/** Every regular file under `folder`, by its path relative to it with `/` separators. */
function listFiles(folder: string): Map<string, string> {
  const files = new Map<string, string>();
  let entries;
  try {
    entries = readdirSync(folder, { recursive: true, withFileTypes: true });
  } catch {
    return files;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue; // symbolic links and folders are not served
    const full = path.join(entry.parentPath, entry.name);
    files.set(path.relative(folder, full).split(path.sep).join('/'), full);
  }
  return files;
}

type Mount = (ctx: Context, next: Next) => Promise<unknown>;

/**
 * The console's mount for `dir` (`CONSOLE_DIR`, else `defaultConsoleDir()`), or undefined, with one
 * warning, when the folder has no `index.html`. `iconsBase`: the address icons are served under
 * (`{CDN_URL}`, or the service's own `/cdn`), read per request: the service's own address is known
 * only once it listens.
 */
export function consoleSite(dir: string | undefined, logger: Logger, iconsBase: () => string): Mount | undefined {
  const folder = dir ?? defaultConsoleDir();
  let index: Buffer;
  try {
    index = readFileSync(path.join(folder, 'index.html'));
  } catch {
    logger.warn({ folder }, 'web console not built: no index.html in its folder, so / answers JSON only (build it, or set CONSOLE_DIR)');
    return undefined;
  }
  const page = new PreparedBody(index, 'text/html; charset=utf-8', 'no-cache');
  const files = listFiles(path.join(folder, 'assets'));
  const prepared = new Map<string, Promise<PreparedBody>>();

  /** A file's body, read on its first request; a failed read is tried again on the next. */
  const asset = (name: string, file: string): Promise<PreparedBody> => {
    let body = prepared.get(name);
    if (!body) {
      const type = TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
      body = readFile(file).then(
        (bytes) => new PreparedBody(bytes, type, IMMUTABLE),
        (error: unknown) => {
          prepared.delete(name);
          throw error;
        },
      );
      prepared.set(name, body);
    }
    return body;
  };

  const csp = (ctx: Context): string => {
    let origin: string | undefined;
    try {
      origin = new URL(iconsBase()).origin;
    } catch {
      origin = undefined;
    }
    return consoleCsp(origin && origin !== requestOrigin(ctx) ? origin : undefined);
  };

  return async (ctx, next) => {
    const requestPath = ctx.path;
    const read = ctx.method === 'GET' || ctx.method === 'HEAD';
    if (requestPath.startsWith(ASSET_PREFIX)) {
      if (!read) throw new MethodNotAllowed(['GET', 'HEAD']);
      // ctx.path is the path as sent, not percent-decoded: `%2e%2e` is looked up as those characters, and is no file.
      const name = requestPath.slice(ASSET_PREFIX.length);
      const file = files.get(name);
      if (file === undefined) throw new NotFound('No such file of the web console.');
      sendPrepared(ctx, await asset(name, file));
      return;
    }
    if (!read) return next();
    ctx.vary('Accept');
    if (!prefersHtml(ctx.get('Accept'))) return next();
    ctx.set('Content-Security-Policy', csp(ctx));
    sendPrepared(ctx, page);
  };
}
