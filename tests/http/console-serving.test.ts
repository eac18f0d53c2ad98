/**
 * The web console served by the service (http/console-assets.ts), from a small build of its own
 * made here in a temporary folder (`CONSOLE_DIR`): its files under `/assets/` with their types,
 * a year's caching and compression; nothing outside that folder, however the path is spelled; its
 * pages as `index.html` to a browser's navigation, with the console's CSP, while API clients keep
 * the JSON they got before; and, with no build, the answers of before and one warning at start.
 * Paths are sent as written with node:http (fetch would resolve `..` and `%2e%2e` itself).
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { pino } from 'pino';
import { defaultConsoleDir } from '../../server/src/http/console-assets.js';
import { database, startServerIn, type TestServer } from '../support/harness.js';
import { rawRequest, type RawAnswer } from '../support/icons.js';

const INDEX = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Signalboard</title>
<script type="module" crossorigin src="/assets/index-Abc123.js"></script>
<link rel="stylesheet" crossorigin href="/assets/index-Def456.css">
</head>
<body><div id="app"></div></body>
</html>
`;
/** Over 1 KiB, so that it is compressed. */
const SCRIPT = `export const pages = ${JSON.stringify(Array.from({ length: 200 }, (_, i) => `page ${i}`))};\n`;
const STYLE = 'body { margin: 0 }\n';
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1"/></svg>\n';
const FONT = Buffer.from([0x77, 0x4f, 0x46, 0x32, 0, 1, 2, 3, 0xff]);
const CHUNK = 'export default 1;\n';

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';
const API_CSP = "default-src 'none'; frame-ancestors 'none'";
const CONSOLE_CSP = (img: string) =>
  `default-src 'self'; script-src 'self'; style-src 'self'; img-src ${img}; connect-src 'self'; font-src 'self'; ` +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const HOME = {
  success: true,
  data: {
    message: 'Signalboard. The API is at /v1, its reference at /docs, its contract at /v1/openapi.json.',
    api: '/v1',
    reference: '/docs',
    contract: '/v1/openapi.json',
  },
};
const NO_FILE = { success: false, error: { code: 'not_found', message: 'No such file of the web console.' } };
const NO_ROUTE = { success: false, error: { code: 'not_found', message: 'No route matches this path.' } };
const PAGES = [
  '/',
  '/signup',
  '/signup?invite=inv_abc',
  '/login',
  '/reset-password?token=rst_x',
  '/projects',
  '/projects/acme',
  '/projects/acme/feeds/general',
  '/account',
];

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/**
 * A server beside the run's, on its database (PostgreSQL) or an embedded one of its own, with the
 * console of `consoleDir` and `env`, logging to `lines`.
 */
async function consoleServer(consoleDir: string, env: Record<string, string> = {}): Promise<{ server: TestServer; lines: LogLine[] }> {
  const lines: LogLine[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as LogLine) });
  const main = database();
  const databaseUrl = main.kind === 'postgresql' ? String(main.orm.config.get('clientUrl')) : '';
  const environment = {
    ...process.env,
    AUTH_RATE_LIMIT: '0',
    API_RATE_LIMIT: '0',
    CDN_RATE_LIMIT: '0',
    ...env,
    CONSOLE_DIR: consoleDir,
    DATABASE_URL: databaseUrl,
  };
  return { server: await startServerIn('signalboard-console', environment, logger), lines };
}

function json(answer: RawAnswer): unknown {
  return JSON.parse(answer.body.toString());
}

/** The body as the service meant it, whatever coding it went in. */
function decoded(answer: RawAnswer): Buffer {
  const coding = answer.headers['content-encoding'];
  if (coding === 'br') return brotliDecompressSync(answer.body);
  if (coding === 'gzip') return gunzipSync(answer.body);
  expect(coding, 'content-encoding').to.equal(undefined);
  return answer.body;
}

/** The headers every answer carries (http/security.ts), the API's CSP aside. */
function expectSecurityHeaders(answer: RawAnswer): void {
  expect(answer.headers['x-content-type-options']).to.equal('nosniff');
  expect(answer.headers['x-frame-options']).to.equal('DENY');
  expect(answer.headers['referrer-policy']).to.equal('no-referrer');
  expect(answer.headers['cross-origin-resource-policy']).to.equal('same-site');
}

describe('the web console served by the service', function () {
  this.timeout(60_000);
  let root: string;
  let built: string;
  let server: TestServer;
  let lines: LogLine[];
  const get = (rawPath: string, headers: Record<string, string> = {}) => rawRequest(server.url, 'GET', rawPath, headers);

  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-console-'));
    built = path.join(root, 'dist');
    mkdirSync(path.join(built, 'assets', 'nested'), { recursive: true });
    writeFileSync(path.join(built, 'index.html'), INDEX);
    writeFileSync(path.join(built, 'assets', 'index-Abc123.js'), SCRIPT);
    writeFileSync(path.join(built, 'assets', 'index-Def456.css'), STYLE);
    writeFileSync(path.join(built, 'assets', 'logo-9f8e.svg'), SVG);
    writeFileSync(path.join(built, 'assets', 'inter-77aa.woff2'), FONT);
    writeFileSync(path.join(built, 'assets', 'nested', 'chunk-1.js'), CHUNK);
    // What no request may reach: a file beside assets/, one outside the console, a link out of assets/.
    writeFileSync(path.join(built, 'secret.txt'), 'beside the assets');
    writeFileSync(path.join(root, 'outside.txt'), 'outside the console');
    symlinkSync(path.join(root, 'outside.txt'), path.join(built, 'assets', 'link.txt'));
    ({ server, lines } = await consoleServer(built));
  });

  after(async () => {
    await server?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('finds console/dist at the repository root from its sources (and from dist/ once compiled)', () => {
    expect(defaultConsoleDir()).to.equal(path.resolve('console/dist'));
  });

  it('serves each file under /assets/ with its type, cached for a year, with an ETag, and HEAD alike', async () => {
    const files: [string, string, Buffer][] = [
      ['/assets/index-Abc123.js', 'text/javascript; charset=utf-8', Buffer.from(SCRIPT)],
      ['/assets/index-Def456.css', 'text/css; charset=utf-8', Buffer.from(STYLE)],
      ['/assets/logo-9f8e.svg', 'image/svg+xml', Buffer.from(SVG)],
      ['/assets/inter-77aa.woff2', 'font/woff2', FONT],
      ['/assets/nested/chunk-1.js', 'text/javascript; charset=utf-8', Buffer.from(CHUNK)],
    ];
    for (const [file, type, bytes] of files) {
      const answer = await get(file);
      expect(answer.status, file).to.equal(200);
      expect(answer.headers['content-type'], file).to.equal(type);
      expect(answer.headers['cache-control'], file).to.equal('public, max-age=31536000, immutable');
      expect(answer.headers['content-length'], file).to.equal(String(bytes.length));
      expect(answer.headers.etag, file).to.match(/^"[A-Za-z0-9_-]{22}"$/);
      expect(answer.body.equals(bytes), file).to.equal(true);
      expectSecurityHeaders(answer);
      expect(answer.headers['content-security-policy'], file).to.equal(API_CSP);

      const head = await rawRequest(server.url, 'HEAD', file);
      expect([head.status, head.body.length, head.headers['content-type']], `HEAD ${file}`).to.deep.equal([200, 0, type]);

      const again = await get(file, { 'If-None-Match': answer.headers.etag! });
      expect([again.status, again.body.length], `If-None-Match ${file}`).to.deep.equal([304, 0]);
    }
  });

  it('compresses a text file of 1 KiB or more in the coding asked for, and leaves smaller ones and fonts as they are', async () => {
    for (const coding of ['br', 'gzip']) {
      const answer = await get('/assets/index-Abc123.js', { 'Accept-Encoding': coding });
      expect(answer.status).to.equal(200);
      expect(answer.headers['content-encoding']).to.equal(coding);
      expect(answer.headers.vary).to.equal('Accept-Encoding');
      expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
      expect(answer.body.length).to.be.lessThan(Buffer.byteLength(SCRIPT));
      expect(decoded(answer).toString()).to.equal(SCRIPT);
    }
    for (const file of ['/assets/index-Def456.css', '/assets/inter-77aa.woff2']) {
      const answer = await get(file, { 'Accept-Encoding': 'br, gzip' });
      expect(answer.headers['content-encoding'], file).to.equal(undefined);
    }
  });

  it('answers 404 in the envelope for an unknown file, and 405 for a method other than GET and HEAD', async () => {
    for (const file of ['/assets/nope.js', '/assets/', '/assets/index-abc123.js', '/assets/nested', '/assets/nested/']) {
      const answer = await get(file);
      expect(answer.status, file).to.equal(404);
      expect(json(answer), file).to.deep.equal(NO_FILE);
    }
    const post = await rawRequest(server.url, 'POST', '/assets/index-Abc123.js');
    expect(post.status).to.equal(405);
    expect(post.headers.allow).to.equal('GET, HEAD');
    expect((json(post) as { error: { code: string } }).error.code).to.equal('method_not_allowed');
  });

  it('reaches nothing outside assets/: dot segments, encoded ones, backslashes, NUL and symbolic links are all 404', async () => {
    const attempts = [
      '/assets/../secret.txt',
      '/assets/../index.html',
      '/assets/../../outside.txt',
      '/assets/nested/../index-Abc123.js',
      '/assets/%2e%2e/secret.txt',
      '/assets/%2E%2E/%2e%2e/outside.txt',
      '/assets/..%2fsecret.txt',
      '/assets/..%2Fsecret.txt',
      '/assets/%2e%2e%2f%2e%2e%2foutside.txt',
      '/assets/..%5csecret.txt',
      '/assets/..\\secret.txt',
      '/assets/%00',
      '/assets/index-Abc123.js%00',
      '/assets/index-Abc123.js%00.png',
      '/assets/link.txt',
      '/assets//etc/passwd',
      '/assets/%2fetc%2fpasswd',
      `/assets/${'../'.repeat(12)}etc/passwd`,
    ];
    for (const attempt of attempts) {
      const answer = await get(attempt);
      expect(answer.status, attempt).to.equal(404);
      expect(json(answer), attempt).to.deep.equal(NO_FILE);
      expect(answer.body.toString(), attempt).not.to.contain('outside the console').and.not.to.contain('beside the assets');
    }
  });

  it("answers a browser's navigation to each page with index.html, revalidated on every use, under the console's CSP", async () => {
    for (const page of PAGES) {
      const answer = await get(page, { Accept: BROWSER_ACCEPT });
      expect(answer.status, page).to.equal(200);
      expect(answer.headers['content-type'], page).to.equal('text/html; charset=utf-8');
      expect(answer.headers['cache-control'], page).to.equal('no-cache');
      expect(answer.headers.vary, page).to.equal('Accept');
      expect(answer.body.toString(), page).to.equal(INDEX);
      // The request came to the address the icons are served from (the service's own /cdn): 'self' covers them.
      expect(answer.headers['content-security-policy'], page).to.equal(CONSOLE_CSP("'self' data: blob:"));
      expectSecurityHeaders(answer);
    }
    const head = await rawRequest(server.url, 'HEAD', '/login', { Accept: BROWSER_ACCEPT });
    expect([head.status, head.body.length, head.headers['content-type']]).to.deep.equal([200, 0, 'text/html; charset=utf-8']);
    // `text/html` alone, or ranked above JSON, is a navigation too.
    for (const accept of ['text/html', 'text/html, application/json;q=0.9', 'text/*, application/json;q=0.5']) {
      const answer = await get('/', { Accept: accept });
      expect(answer.headers['content-type'], accept).to.equal('text/html; charset=utf-8');
    }
  });

  it('keeps answering GET / with the JSON index, and other pages 404, to every request that does not rank HTML above JSON', async () => {
    for (const accept of [
      undefined,
      '*/*',
      'application/json',
      'application/json, text/html',
      'text/html, application/json',
      'text/html;q=0.5, application/json',
      'image/png',
    ]) {
      const headers: Record<string, string> = accept === undefined ? {} : { Accept: accept };
      const home = await get('/', headers);
      expect(home.status, String(accept)).to.equal(200);
      expect(home.headers['content-type'], String(accept)).to.equal('application/json; charset=utf-8');
      expect(home.headers['content-security-policy'], String(accept)).to.equal(API_CSP);
      expect(home.headers.vary, String(accept)).to.equal('Accept');
      expect(json(home), String(accept)).to.deep.equal(HOME);
      const login = await get('/login', headers);
      expect([login.status, json(login)], String(accept)).to.deep.equal([404, NO_ROUTE]);
    }
    // Not pages of the console: the router's 404 for a browser too; other methods as before.
    for (const other of ['/projectsx', '/settings', '/login/', '/index.html', '/assetsx']) {
      const answer = await get(other, { Accept: BROWSER_ACCEPT });
      expect([answer.status, json(answer)], other).to.deep.equal([404, NO_ROUTE]);
    }
    const post = await rawRequest(server.url, 'POST', '/login', { Accept: BROWSER_ACCEPT });
    expect(post.status).to.equal(404);
    // The API's answers keep the API's CSP.
    const v1 = await get('/v1', { Accept: BROWSER_ACCEPT });
    expect(v1.headers['content-type']).to.equal('application/json; charset=utf-8');
    expect(v1.headers['content-security-policy']).to.equal(API_CSP);
  });

  it('lets images come from the icons address when that is another origin, and gives the page an ETag of its own', async () => {
    // The same service reached by another name: its icons (http://127.0.0.1:<port>/cdn) are then another origin.
    const port = new URL(server.url).port;
    const byName = await get('/', { Accept: BROWSER_ACCEPT, Host: `localhost:${port}` });
    expect(byName.headers['content-security-policy']).to.equal(CONSOLE_CSP(`'self' data: blob: http://127.0.0.1:${port}`));
    const page = await get('/', { Accept: BROWSER_ACCEPT });
    const home = await get('/', { Accept: 'application/json' });
    expect(page.headers.etag).to.match(/^"[A-Za-z0-9_-]{22}"$/);
    expect(page.headers.etag).not.to.equal(home.headers.etag);
    const revalidated = await get('/', { Accept: BROWSER_ACCEPT, 'If-None-Match': page.headers.etag! });
    expect(revalidated.status).to.equal(304);
  });

  it('names a CDN_URL on another origin in img-src', async () => {
    const { server: behindCdn } = await consoleServer(built, { CDN_URL: 'https://cdn.example.com/signalboard' });
    try {
      const page = await rawRequest(behindCdn.url, 'GET', '/projects', { Accept: BROWSER_ACCEPT });
      expect(page.headers['content-security-policy']).to.equal(CONSOLE_CSP("'self' data: blob: https://cdn.example.com"));
    } finally {
      await behindCdn.close();
    }
  });

  it('logs no warning when the console is built', () => {
    expect(lines.filter((line) => line.level >= 40)).to.deep.equal([]);
  });

  it('without a build, answers as before (JSON at /, 404 elsewhere) and says so once, as a warning, at start', async () => {
    const empty = path.join(root, 'not-built');
    mkdirSync(path.join(empty, 'assets'), { recursive: true });
    writeFileSync(path.join(empty, 'assets', 'index-Abc123.js'), SCRIPT); // files without an index.html are not served either
    const { server: unbuilt, lines: logged } = await consoleServer(empty);
    try {
      const home = await rawRequest(unbuilt.url, 'GET', '/', { Accept: BROWSER_ACCEPT });
      expect([home.status, home.headers['content-type'], json(home)]).to.deep.equal([200, 'application/json; charset=utf-8', HOME]);
      expect(home.headers.vary).to.equal(undefined);
      for (const other of ['/login', '/projects/acme', '/assets/index-Abc123.js']) {
        const answer = await rawRequest(unbuilt.url, 'GET', other, { Accept: BROWSER_ACCEPT });
        expect([answer.status, json(answer)], other).to.deep.equal([404, NO_ROUTE]);
      }
      const warnings = logged.filter((line) => line.level >= 40);
      expect(warnings.map(({ level, msg, folder }) => ({ level, msg, folder }))).to.deep.equal([
        {
          level: 40,
          msg: 'web console not built: no index.html in its folder, so / answers JSON only (build it, or set CONSOLE_DIR)',
          folder: empty,
        },
      ]);
    } finally {
      await unbuilt.close();
    }
  });
});
