/**
 * `npm run bench:console` (`npx tsx bench/console-first-events.ts`): how soon a project's page of the
 * web console shows its first events, in headless Chromium, on PostgreSQL.
 *
 * On the server of the admin URL it creates a fresh database `sb_console_<ts>`, builds and starts the
 * service as users run it (bench/processes.ts; the console from `console/dist`, built first by
 * `npm run build:console` when it is missing or older than `console/src`), seeds one account with
 * one project (bench/seed.ts), publishes `--events` events into the project's `general` feed (one
 * batch), and signs in through `POST /v1/auth/login` with `cookie: true`: the browser holds only the
 * `sb_session` cookie, as after a login in the console.
 *
 * Chromium (playwright-core, the launch of tests/console/browser.ts) then opens the project's page,
 * `/projects/<namespace>` (the live feed, console/src/pages/project/feed.tsx), `--runs` times after
 * `--warmups` unmeasured ones, in two ways:
 *
 * - **cold**: a new browser context for each navigation (no HTTP cache, no cookie but the session's);
 * - **warm**: one context, the page reloaded each time (the console's hashed files are cached for a
 *   year; `index.html` is `no-cache`).
 *
 * The figure is the page's own `performance.now()` (0 = the navigation's start) when the first event
 * row (`li.event`) enters the document, taken by a MutationObserver that an init script installs
 * before the page's scripts run. Beside it, from the page's Navigation and Resource Timing, the
 * medians of when the document arrived, when the last of the console's files fetched before the
 * first row arrived, and when the first page of events (`GET …/events?limit=50`) was answered.
 *
 * The service, PostgreSQL and Chromium share the machine (2 cores). Prints p50/p95/max and writes
 * them into bench/console-results.md between its markers.
 *
 * Options: --admin-url URL (default DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres);
 * --runs N (default 30); --warmups N (default 3); --events N (default 200); --no-write; --keep-db.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launch } from '../tests/console/browser.js';
import { freshDatabase } from '../tests/support/pg-cluster.js';
import { loadAverage, machine, writeGeneratedBlock } from './bulk.js';
import { percentile } from './load.js';
import { buildService, root, startService } from './processes.js';
import { json, median, round } from './run.js';
import { seed } from './seed.js';

const { values: args } = parseArgs({
  options: {
    'admin-url': { type: 'string' },
    runs: { type: 'string', default: '30' },
    warmups: { type: 'string', default: '3' },
    events: { type: 'string', default: '200' },
    'no-write': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
  },
});
const adminUrl = args['admin-url'] ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const runs = Number(args.runs);
const warmups = Number(args.warmups);
const eventCount = Number(args.events);

/** The target of the console's issue: the first events within this many ms of the navigation. */
const TARGET_MS = 300;

const note = (text: string) => process.stderr.write(`${text}\n`);

/** The newest modification time of any file under `dir`. */
function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(full) : statSync(full).mtimeMs);
  }
  return latest;
}

/** `console/dist` as the service serves it: built by `npm run build:console` if missing or older than its sources. */
function ensureConsoleBuilt(): string {
  const index = path.join(root, 'console/dist/index.html');
  const why = !existsSync(index)
    ? 'missing'
    : newest(path.join(root, 'console/src')) > statSync(index).mtimeMs
      ? 'older than console/src'
      : undefined;
  if (!why) return 'console/dist as built';
  note(`console/dist is ${why}: npm run build:console`);
  execFileSync('npm', ['run', 'build:console'], { cwd: root, stdio: 'inherit' });
  return `console/dist built by this run (it was ${why})`;
}

/**
 * Runs in every document before its scripts: records `performance.now()` when the first `li.event`
 * enters the document. A string, so that no helper of the TypeScript compiler rides along.
 */
const OBSERVE_FIRST_ROW = `(() => {
  const observer = new MutationObserver(() => {
    if (window.__firstEventAt === undefined && document.querySelector('li.event')) {
      window.__firstEventAt = performance.now();
      observer.disconnect();
    }
  });
  observer.observe(document, { childList: true, subtree: true });
})();`;

/** One navigation's figures, in ms from its start. */
interface Sample {
  firstEvent: number;
  document: number;
  files: number;
  eventsPage: number;
}

/** Waits for the first row of the document the page now holds, and reads the figures from it. */
async function sampleOf(page: Page, namespace: string): Promise<Sample> {
  // The row's moment is the observer's; this only waits for it (a string predicate would be eval, which the console's CSP refuses).
  await page.waitForSelector('li.event', { state: 'attached', timeout: 20_000 }).catch((error: unknown) => {
    throw new Error(`no event row on ${page.url()} within 20 s`, { cause: error });
  });
  const sample = await page.evaluate<Sample & { path: string }>(`(() => {
    const first = window.__firstEventAt;
    const before = performance.getEntriesByType('resource').filter((e) => e.responseEnd <= first);
    const files = before.filter((e) => new URL(e.name).pathname.startsWith('/assets/'));
    const page = before.find((e) => new URL(e.name).pathname === '/v1/projects/${namespace}/events');
    return {
      path: location.pathname,
      firstEvent: first,
      document: performance.getEntriesByType('navigation')[0].responseEnd,
      files: Math.max(0, ...files.map((e) => e.responseEnd)),
      eventsPage: page ? page.responseEnd : NaN,
    };
  })()`);
  if (sample.path !== `/projects/${namespace}`) throw new Error(`the page ended at ${sample.path}, not the project's feed`);
  return sample;
}

interface Figures {
  samples: Sample[];
}

async function cold(browser: Browser, url: string, cookie: string, namespace: string): Promise<Figures> {
  const samples: Sample[] = [];
  for (let i = 0; i < warmups + runs; i++) {
    const context = await newContext(browser, url, cookie);
    try {
      const page = await context.newPage();
      await page.goto(`${url}/projects/${namespace}`, { waitUntil: 'commit' });
      const sample = await sampleOf(page, namespace);
      if (i >= warmups) samples.push(sample);
    } finally {
      await context.close();
    }
  }
  return { samples };
}

async function warm(browser: Browser, url: string, cookie: string, namespace: string): Promise<Figures> {
  const samples: Sample[] = [];
  const context = await newContext(browser, url, cookie);
  try {
    const page = await context.newPage();
    await page.goto(`${url}/projects/${namespace}`, { waitUntil: 'commit' });
    await sampleOf(page, namespace);
    for (let i = 0; i < warmups + runs; i++) {
      await page.reload({ waitUntil: 'commit' });
      const sample = await sampleOf(page, namespace);
      if (i >= warmups) samples.push(sample);
    }
  } finally {
    await context.close();
  }
  return { samples };
}

async function newContext(browser: Browser, url: string, cookie: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addCookies([{ name: 'sb_session', value: cookie, url, httpOnly: true, sameSite: 'Strict' }]);
  await context.addInitScript(OBSERVE_FIRST_ROW);
  return context;
}

function summary(figures: Figures) {
  const sorted = figures.samples.map((s) => s.firstEvent).sort((a, b) => a - b);
  const of = (key: keyof Sample) => round(median(figures.samples.map((s) => s[key])), 0);
  return {
    p50: round(percentile(sorted, 50), 0),
    p95: round(percentile(sorted, 95), 0),
    max: round(sorted.at(-1)!, 0),
    within: sorted.filter((ms) => ms <= TARGET_MS).length,
    document: of('document'),
    files: of('files'),
    eventsPage: of('eventsPage'),
  };
}

async function main(): Promise<void> {
  const outDir = path.join(os.tmpdir(), `signalboard-bench-console-${Date.now()}`);
  mkdirSync(outDir, { recursive: true });
  const description = await machine(adminUrl);
  note(description);
  const loadBefore = loadAverage();
  const consoleBuild = ensureConsoleBuilt();
  const db = await freshDatabase(adminUrl, 'sb_console');
  let browser: Browser | undefined;
  try {
    note(`built the service in ${(buildService() / 1000).toFixed(1)} s`);
    const service = await startService(
      'console',
      {
        DATABASE_URL: db.url,
        AUTH_RATE_LIMIT: '0',
        API_RATE_LIMIT: '0',
        LOG_LEVEL: 'warn',
        DATA_DIR: path.join(outDir, 'data'),
      },
      path.join(outDir, 'service.log'),
    );
    try {
      // The service serves the console: a navigation's Accept gets index.html.
      const shell = await fetch(`${service.url}/projects`, { headers: { accept: 'text/html' } });
      if (shell.status !== 200 || !shell.headers.get('content-type')?.startsWith('text/html'))
        throw new Error(`GET /projects as a browser's navigation: ${shell.status} ${shell.headers.get('content-type')}, not the console`);
      await shell.arrayBuffer();

      const fixture = await seed(db.url, {
        users: 1,
        projects: 1,
        membersPerProject: 1,
        feedsPerProject: 1,
        insightsPerProject: 0,
        largestActivity: 0,
        smallLog: 0,
        hugeLog: 0,
      });
      const owner = fixture.users[fixture.largest.members[0]!]!;
      const namespace = fixture.largest.namespace;
      const { data } = await json<{ data: { token: string } }>(`${service.url}/v1/auth/login`, 'POST', {
        login: owner.username,
        password: fixture.password,
      });
      for (let sent = 0; sent < eventCount; sent += 1000) {
        const events = Array.from({ length: Math.min(1000, eventCount - sent) }, (_, k) => ({
          feed: 'general',
          event: `Order ${sent + k + 1} paid`,
          description: `Customer ${(sent + k) % 37} paid for an order`,
          emoji: '💸',
          tags: { plan: (sent + k) % 3 === 0 ? 'pro' : 'free', region: 'eu-west' },
          user_id: `customer-${(sent + k) % 37}`,
        }));
        await json(`${service.url}/v1/projects/${namespace}/events`, 'POST', { events }, data.token);
      }

      const login = await fetch(`${service.url}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ login: owner.username, password: fixture.password, cookie: true }),
      });
      await login.arrayBuffer();
      const cookie = login.headers
        .getSetCookie()
        .map((line) => /^sb_session=([^;]+)/.exec(line)?.[1])
        .find(Boolean);
      if (!login.ok || !cookie) throw new Error(`login with cookie: true: ${login.status}, no sb_session cookie`);

      browser = await launch();
      const version = browser.version();
      note(`Chromium ${version}; ${runs} navigations after ${warmups} warm-ups, cold then warm`);
      const coldFigures = summary(await cold(browser, service.url, cookie, namespace));
      note(`cold: p50 ${coldFigures.p50} ms, p95 ${coldFigures.p95} ms, max ${coldFigures.max} ms`);
      const warmFigures = summary(await warm(browser, service.url, cookie, namespace));
      note(`warm: p50 ${warmFigures.p50} ms, p95 ${warmFigures.p95} ms, max ${warmFigures.max} ms`);
      const loadAfter = loadAverage();

      const row = (label: string, f: ReturnType<typeof summary>) =>
        `| ${label} | ${f.p50} | **${f.p95}** | ${f.max} | ${f.within} of ${runs} | ${f.document} | ${f.files} | ${f.eventsPage} |`;
      const report = [
        `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}: ${description}; load average before ${loadBefore.join(' / ')}, after ${loadAfter.join(' / ')}. ` +
          `Headless Chromium ${version} (playwright-core), viewport 1280×800, on the same machine as the service and PostgreSQL; ${consoleBuild}. ` +
          `The project holds ${eventCount} events (the feed's first page shows 50); the session is the \`sb_session\` cookie. ` +
          `${runs} navigations to \`/projects/<namespace>\` each way, after ${warmups} unmeasured.`,
        '',
        `| Navigation to a project's page (its live feed) | first event row in the document: p50 ms | p95 ms | max ms | within ${TARGET_MS} ms | document received, p50 ms | last console file fetched before the row, p50 ms | first page of events answered, p50 ms |`,
        '|---|---:|---:|---:|---:|---:|---:|---:|',
        row('Cold: a new browser context each time (no HTTP cache)', coldFigures),
        row('Warm: the same context, reloaded (hashed files from the cache)', warmFigures),
        '',
        `Times are the page's \`performance.now()\` (0 = the navigation's start). Target: the first events within ${TARGET_MS} ms.`,
      ];
      process.stdout.write(`${report.join('\n')}\n`);
      if (!args['no-write']) {
        writeGeneratedBlock(
          path.join(root, 'bench/console-results.md'),
          { start: '<!-- console:start -->', end: '<!-- console:end -->' },
          report.join('\n'),
          "# Console: a project's first events\n\nWritten by `npm run bench:console` (bench/console-first-events.ts says how each figure is taken).",
        );
      }
    } finally {
      await browser?.close();
      await service.stop();
    }
  } finally {
    if (!args['keep-db']) await db.drop();
    rmSync(path.join(outDir, 'data'), { recursive: true, force: true });
  }
}

await main();
