/**
 * The fixed cost of a request, in-process: the CPU one `GET /v1` takes in the service's Koa app
 * (every middleware, the handler, Node's formatting of the answer's head), against a bare Koa app
 * answering the same JSON, both driven through Node's own `IncomingMessage` and `ServerResponse` on
 * a socket that drops what is written. No network, no database, no other process: what the
 * autocannon scenario `GET /v1` measures minus the kernel and the load generator, so that a few µs
 * of pipeline are visible on a busy machine where the two processes' ratio moves by ±15 %.
 *
 * It runs the compiled service (`npm run build`: dist/), as the bench's processes do, and with
 * Node 20's promise hooks installed, as the service's process has them once MikroORM has run a
 * transaction in its AsyncLocalStorage (migrations, any write): every promise a request makes pays
 * for them (`--no-als` measures without). Subjects are measured in interleaved rounds; the figure
 * is the median of the rounds.
 *
 *   tsx bench/fixed-cost.ts                         the service of this checkout against bare Koa
 *   tsx bench/fixed-cost.ts --root ../before --root .   two builds side by side (each built first)
 *   tsx bench/fixed-cost.ts --stages                also the app without each of its stages in turn
 *                                                   (the differences price the stages)
 *   tsx bench/fixed-cost.ts --promises              promises made and reactions run per request
 *   tsx bench/fixed-cost.ts --allocations           bytes allocated per request, and where
 *
 * Options: --rounds N (default 9), --requests N per round (default 10000), --path (default /v1),
 * --json (the figures as one JSON line: what `npm run bench` records).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { promiseHooks } from 'node:v8';
import Koa, { type Middleware } from 'koa';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '9' },
    requests: { type: 'string', default: '10000' },
    root: { type: 'string', multiple: true },
    stages: { type: 'boolean', default: false },
    promises: { type: 'boolean', default: false },
    allocations: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    path: { type: 'string', default: '/v1' },
    'no-als': { type: 'boolean', default: false },
  },
});
const rounds = Number(args.rounds);
const perRound = Number(args.requests);
const roots = (args.root ?? [path.resolve(import.meta.dirname, '..')]).map((root) => path.resolve(root));

/** A socket that takes every write at once and drops it: Node formats and "writes" the answer as on a real one. */
class NullSocket extends Duplex {
  constructor() {
    // Strings are taken as they are, as a TCP socket writes them (without a Buffer of their own).
    super({ decodeStrings: false });
  }
  remoteAddress = '127.0.0.1';
  remotePort = 40000;
  override _read(): void {}
  override _write(_chunk: unknown, _encoding: string, callback: () => void): void {
    callback();
  }
  override _writev(_chunks: unknown[], callback: () => void): void {
    callback();
  }
  setTimeout(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
}

type Callback = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> | void;

const socket = new NullSocket();
socket.setMaxListeners(0);

/** What autocannon sends. */
const HEADERS = { host: '127.0.0.1:3000', 'user-agent': 'autocannon', connection: 'keep-alive' };

/** One request through `callback`, as Node's server hands it over (keep-alive, HTTP/1.1); resolves with the status once the answer is written. */
function request(callback: Callback): Promise<number> {
  const req = new http.IncomingMessage(socket as never);
  req.method = 'GET';
  req.url = args.path;
  req.httpVersion = '1.1';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.headers = HEADERS;
  req.rawHeaders = Object.entries(HEADERS).flat();
  req.complete = true;
  req.push(null);
  const res = new http.ServerResponse(req);
  res.shouldKeepAlive = true;
  res.assignSocket(socket as never);
  return new Promise((resolve) => {
    res.once('finish', () => {
      res.detachSocket(socket as never);
      resolve(res.statusCode);
    });
    void callback(req, res);
  });
}

/** µs of CPU (user + system) per request over `count` requests, one after another. */
async function measure(callback: Callback, count: number): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < count; i++) await request(callback);
  const spent = process.cpuUsage(started);
  return (spent.user + spent.system) / count;
}

const ROOT_ANSWER = {
  success: true,
  data: {
    message: 'Hello from Signalboard. The API reference is at /docs, its contract at /v1/openapi.json.',
    webhooks: { disable_after_seconds: 259_200, max_pending_deliveries: 10_000 },
  },
};
const SECURITY: [string, string][] = [
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Referrer-Policy', 'no-referrer'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
  ['Cross-Origin-Resource-Policy', 'same-site'],
];

/**
 * The baselines' app, as bench/baseline-server.ts builds it: `bare`, or with `headers` the same
 * answer carrying the service's headers (a request id, the security headers, its tag, Cache-Control).
 */
function bareApp(headers: boolean): Callback {
  const app = new Koa();
  const tag = `"${createHash('sha256').update(JSON.stringify(ROOT_ANSWER)).digest('base64url').slice(0, 22)}"`;
  app.use((ctx) => {
    if (headers) {
      ctx.res.setHeader('X-Request-Id', randomUUID());
      for (const [name, value] of SECURITY) ctx.res.setHeader(name, value);
    }
    if (ctx.method === 'GET' && ctx.path === '/v1') {
      ctx.body = ROOT_ANSWER;
      if (headers) ctx.set({ ETag: tag, 'Cache-Control': 'private, no-cache' });
      return;
    }
    ctx.status = 404;
  });
  return app.callback();
}

/** The service's app as app.ts builds it from the build in `root`, and with `--stages` the app without each stage. */
async function serviceApps(root: string): Promise<Map<string, Callback>> {
  const load = <T>(file: string): Promise<T> => import(path.join(root, 'dist/server/src', file)) as Promise<T>;
  const { createApp } = await load<typeof import('../server/src/app.js')>('app.js');
  const { Contract } = await load<typeof import('../server/src/http/contract.js')>('http/contract.js');
  const { RateLimits } = await load<typeof import('../server/src/http/rate-limit.js')>('http/rate-limit.js');
  const { loadConfig } = await load<typeof import('../server/src/config.js')>('config.js');
  const { createLogger } = await load<typeof import('../server/src/logger.js')>('logger.js');
  const config = loadConfig({ DATABASE_URL: 'postgres://bench@127.0.0.1:1/none', API_RATE_LIMIT: '0', AUTH_RATE_LIMIT: '0' });
  // The request line as the service makes it, formatted by pino and dropped: the service writes the
  // lines of an event-loop turn together, which under load is a small part of a line's cost.
  const logger = createLogger('info', 'json', { write: (line: string) => void line });
  const contract = await Contract.load();
  const rateLimits = RateLimits.create(config, { kind: 'embedded' } as never, logger);
  // GET /v1 never reaches the database: a request that did would fail here, loudly.
  const pipeline = { contract, orm: {} as never, rateLimits };
  const services = { config, logger } as never;
  const label = roots.length > 1 ? `service (${path.basename(root)})` : 'service';
  const apps = new Map<string, Callback>([[label, createApp(services, pipeline).callback()]]);
  if (!args.stages) return apps;

  const { dropUnreadBodies } = await load<typeof import('../server/src/http/body.js')>('http/body.js');
  const { requestLog } = await load<typeof import('../server/src/http/request-log.js')>('http/request-log.js');
  const { securityHeaders } = await load<typeof import('../server/src/http/security.js')>('http/security.js');
  const { representations } = await load<typeof import('../server/src/http/representation.js')>('http/representation.js');
  const { envelope } = await load<typeof import('../server/src/http/envelope.js')>('http/envelope.js');
  const { dispatch } = await load<typeof import('../server/src/http/dispatch.js')>('http/dispatch.js');
  const { handlers } = await load<typeof import('../server/src/handlers/index.js')>('handlers/index.js');
  // The stages of app.ts, in order (metrics, CORS and the static mounts are off or passed by for GET /v1).
  const stages: [string, () => Middleware][] = [
    ['dropUnreadBodies', () => dropUnreadBodies()],
    ['requestLog', () => requestLog(logger)],
    ['securityHeaders', () => securityHeaders()],
    ['representations', () => representations()],
    ['envelope', () => envelope()],
    ['dispatch', () => dispatch(pipeline, handlers, services)],
  ];
  for (const [left] of stages) {
    const app = new Koa();
    app.silent = true;
    // Without the request log, `ctx.state` is Koa's plain object: the state the others expect is set here.
    if (left === 'requestLog') app.use((ctx, next) => ((ctx.state = { log: logger } as never), next()));
    for (const [name, make] of stages) if (name !== left) app.use(make());
    // Without the envelope, the handler's answer is sent as Koa would send it.
    if (left === 'envelope') app.use((ctx) => void (ctx.body = ctx.state.reply));
    apps.set(`${label} without ${left}`, app.callback());
  }
  return apps;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (n: number) => Math.round(n * 10) / 10;

async function main(): Promise<void> {
  if (!args['no-als']) new AsyncLocalStorage().run({}, () => undefined);
  const subjects = new Map<string, Callback>([
    ['bare Koa', bareApp(false)],
    ["bare Koa with the service's headers", bareApp(true)],
  ]);
  /** Each root's whole app, by the root's position. */
  const wholes: string[] = [];
  for (const root of roots) {
    const apps = await serviceApps(root);
    wholes.push(apps.keys().next().value!);
    for (const [name, app] of apps) subjects.set(name, app);
  }
  for (const [name, callback] of subjects) {
    const status = await request(callback);
    if (status !== 200 && !name.includes(' without ')) throw new Error(`${name}: GET ${args.path} answered ${status}`);
  }
  if (args.promises) await countPromises(subjects);
  else if (args.allocations) await allocations(subjects);
  else await timings(subjects, wholes);
}

/** What `--json` prints (scripts/bench.ts records it): µs of CPU per request, medians of the rounds. */
export interface FixedCost {
  path: string;
  rounds: number;
  requests: number;
  bareMicros: number;
  /** The service's app, by root (one root: one entry). */
  service: { root: string; micros: number; rounds: number[] }[];
}

/** µs of CPU per request, each subject in turn in every round; medians. */
async function timings(subjects: Map<string, Callback>, wholes: string[]): Promise<void> {
  // Warm-up: every subject compiled and optimised before any is measured.
  for (const callback of subjects.values()) await measure(callback, perRound);
  const figures = new Map<string, number[]>([...subjects.keys()].map((name) => [name, []]));
  for (let r = 0; r < rounds; r++) for (const [name, callback] of subjects) figures.get(name)!.push(await measure(callback, perRound));
  const bare = median(figures.get('bare Koa')!);
  if (args.json) {
    const result: FixedCost = {
      path: args.path,
      rounds,
      requests: perRound,
      bareMicros: round(bare),
      service: roots.map((root, i) => {
        const values = figures.get(wholes[i]!)!;
        return { root, micros: round(median(values)), rounds: values.map(round) };
      }),
    };
    say(JSON.stringify(result));
    return;
  }
  for (const [name, values] of figures) {
    const m = median(values);
    const whole = name.includes(' without ') ? median(figures.get(name.split(' without ')[0]!)!) : undefined;
    const stage = whole === undefined ? '' : `; the stage ${(whole - m).toFixed(1)} µs`;
    say(
      `${name.padEnd(44)} ${m.toFixed(1).padStart(6)} µs/request (${values.map((v) => v.toFixed(1)).join(', ')}), ×${(m / bare).toFixed(2)} bare${stage}`,
    );
  }
}

/** Promises made and reactions run per request (the harness's own included: the same for every subject). */
async function countPromises(subjects: Map<string, Callback>): Promise<void> {
  let made = 0;
  let ran = 0;
  const stop = [promiseHooks.onInit(() => void made++), promiseHooks.onBefore(() => void ran++)] as (() => void)[];
  for (const [name, callback] of subjects) {
    [made, ran] = [0, 0];
    for (let i = 0; i < 100; i++) await request(callback);
    say(`${name.padEnd(44)} ${made / 100} promises made, ${ran / 100} reactions run per request`);
  }
  for (const hook of stop) hook();
}

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

/** Bytes allocated per request, collected or not (V8's sampling heap profiler), and the sites that allocate most. */
async function allocations(subjects: Map<string, Callback>): Promise<void> {
  const session = new Session();
  session.connect();
  const count = 5_000;
  for (const [name, callback] of subjects) {
    for (let i = 0; i < 2_000; i++) await request(callback);
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 256,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    for (let i = 0; i < count; i++) await request(callback);
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: { head: HeapNode } };
    const bySite = new Map<string, number>();
    let total = 0;
    const walk = (node: HeapNode): void => {
      const { functionName, url, lineNumber } = node.callFrame;
      const site = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(?:node_modules|dist)\//, '')}:${lineNumber + 1}`;
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
      total += node.selfSize;
      node.children.forEach(walk);
    };
    walk(profile.head);
    say(`${name}: ${(total / count / 1024).toFixed(1)} KiB allocated per request; the sites allocating most:`);
    for (const [site, bytes] of [...bySite].sort((x, y) => y[1] - x[1]).slice(0, 15))
      say(`  ${(bytes / count).toFixed(0).padStart(6)} B  ${site}`);
  }
  session.disconnect();
}

function say(text: string): void {
  process.stdout.write(text + '\n');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
