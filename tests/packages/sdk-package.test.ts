/**
 * The SDK as users get it: packed with `npm pack`, installed into a new, empty project in a
 * temporary folder, and used from there by three consumers, an ES module in TypeScript, a plain
 * CommonJS script (`require`) and a CommonJS module in TypeScript (type-checked under both
 * `module: node16` and the older `module: commonjs`), each run against the live server through a
 * proxy. The proxy lets each consumer's first publish reach the server but cuts the connection
 * before the answer gets back: the SDK must repeat it with the same Idempotency-Key, and the
 * server must apply it once. The consumers run on this Node.js, or on the one SDK_CONSUMER_NODE
 * names (to check the package on other versions).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { baseUrl, count } from '../support/harness.js';
import { signUp } from '../support/accounts.js';
import { namespaceName } from '../support/projects.js';

const run = promisify(execFile);
const root = path.resolve('.');
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
const node = process.env.SDK_CONSUMER_NODE ?? process.execPath;
const sdkVersion = (JSON.parse(readFileSync(path.join(root, 'sdk/package.json'), 'utf8')) as { version: string }).version;

const tsconfig = (module: string, moduleResolution: string) => ({
  compilerOptions: { target: 'ES2022', module, moduleResolution, strict: true, outDir: 'out', lib: ['ES2022', 'DOM'], types: [] },
  include: ['*.ts'],
});

/**
 * What each consumer does, in code that is both JavaScript and TypeScript: create a project, read
 * it, increment an insight, publish an event (the call the proxy cuts), walk a list across pages,
 * and catch the error of a project that does not exist. It prints what it got as JSON.
 */
const SCENARIO = `
declare const process: { env: Record<string, string>; exitCode: number };

async function main() {
  const { SB_URL: baseUrl, SB_TOKEN: token, SB_NAMESPACE: namespace } = process.env;
  const sb = new Signalboard({ baseUrl, token });
  const project = await sb.projects.create({ name: 'From the package', namespace });
  const fetched = await sb.projects.get(namespace);
  const insight = await sb.insights.create(namespace, { title: 'Deploys', value: 1 });
  const incremented = await sb.insights.increment(namespace, insight.id, 2);
  await sb.insights.create(namespace, { title: 'Errors', value: 0 });
  await sb.insights.create(namespace, { title: 'Healthy', value: true });
  const event = await sb.events.publish(namespace, 'general', { event: 'Shipped', tags: { by: 'consumer' } });
  const titles = [];
  for await (const each of sb.insights.list(namespace, { limit: 2 })) titles.push(each.title);
  let error;
  try {
    await sb.projects.get(namespace + '-missing');
  } catch (caught) {
    error = caught;
  }
  console.log(JSON.stringify({
    project: project.namespace,
    fetched: fetched.id === project.id,
    value: incremented.value,
    event: event.id,
    titles,
    error: error instanceof SignalboardError && error instanceof SignalboardApiError
      ? { name: error.name, status: error.status, code: error.code, requestId: error.requestId }
      : String(error),
  }));
}
`;

const CONSUMERS = {
  'ESM, TypeScript': {
    file: 'esm.ts',
    source: `import { Signalboard, SignalboardApiError, SignalboardError } from '@signalboard/sdk';\n${SCENARIO}\nawait main();\n`,
    run: 'out/esm.js',
  },
  'CommonJS, require': {
    file: 'cjs/plain.cjs',
    source: `const { Signalboard, SignalboardApiError, SignalboardError } = require('@signalboard/sdk');\n${SCENARIO.replace(/^declare .*$/m, '')}\nmain().catch((e) => {\n  console.error(e);\n  process.exitCode = 1;\n});\n`,
    run: 'cjs/plain.cjs',
  },
  'CommonJS, TypeScript': {
    file: 'cjs/consumer.ts',
    source: `import { Signalboard, SignalboardApiError, SignalboardError } from '@signalboard/sdk';\n${SCENARIO}\nmain().catch((e: unknown) => {\n  console.error(e);\n  process.exitCode = 1;\n});\n`,
    run: 'cjs/out/consumer.js',
  },
};

/**
 * Misspelt, mistyped and undefined fields, and wrong argument types: none may compile, in the
 * resource methods or in the low-level client. Each line's number is asserted below.
 */
const WRONG = `
import { createRawClient, Signalboard } from '@signalboard/sdk';

const sb = new Signalboard({ baseUrl: 'http://localhost:3000' });
const raw = createRawClient({ baseUrl: 'http://localhost:3000' });
await sb.projects.create({ name: 'x', namspace: 'abc' });
await sb.projects.create({ name: 'x', namespace: 'abc', colour: 'red' });
await sb.insights.increment('abc', 'id', '1');
await sb.projects.list({ limit: 'ten' }).page();
await raw.POST('/v1/projects', { body: { name: 'x', namspace: 'abc' } });
await raw.GET('/v1/projects', { params: { query: { limit: 'ten' } } });
await raw.POST('/v1/projects', { body: { name: 'x', namespace: 'abc', colour: 'red' } });
await raw.PATCH('/v1/projects/{namespace}', { params: { path: { namespace: 'abc' } }, body: { name: 'y', tier: 2 } });
`;

/** What a proxy passed on: each answer, and the publishes it cut. */
interface Passed {
  method: string;
  path: string;
  status: number | 'cut';
  requestId: string | undefined;
  idempotencyKey: string | undefined;
  userAgent: string | undefined;
}

/**
 * An HTTP proxy in front of the server. It forwards every request and the whole answer, except the
 * first publish to a feed of each project: that one it forwards, waits for the server's whole
 * answer (the event is stored), and then closes the client's connection without passing it on.
 */
async function cuttingProxy(target: string) {
  const passed: Passed[] = [];
  const cutFor = new Set<string>();
  const server = http.createServer((request, response) => {
    const upstream = http.request(`${target}${request.url}`, { method: request.method, headers: request.headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => {
        const publish = /^\/v1\/projects\/([^/]+)\/feeds\/[^/]+\/events$/.exec(request.url!);
        const cut = request.method === 'POST' && publish !== null && !cutFor.has(publish[1]!);
        passed.push({
          method: request.method!,
          path: request.url!,
          status: cut ? 'cut' : answer.statusCode!,
          requestId: answer.headers['x-request-id'] as string | undefined,
          idempotencyKey: request.headers['idempotency-key'] as string | undefined,
          userAgent: request.headers['user-agent'],
        });
        if (cut) {
          cutFor.add(publish[1]!);
          request.socket.destroy();
          return;
        }
        response.writeHead(answer.statusCode!, answer.headers);
        response.end(Buffer.concat(chunks));
      });
    });
    upstream.on('error', () => request.socket.destroy());
    request.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    passed,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('the SDK package', function () {
  this.timeout(240_000);
  let dir: string;
  let proxy: Awaited<ReturnType<typeof cuttingProxy>>;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-sdk-consumer-'));
    await run('npm', ['pack', '--pack-destination', dir], { cwd: path.join(root, 'sdk') });
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig('NodeNext', 'NodeNext')));
    mkdirSync(path.join(dir, 'cjs'));
    writeFileSync(path.join(dir, 'cjs/package.json'), JSON.stringify({ type: 'commonjs' }));
    writeFileSync(path.join(dir, 'cjs/tsconfig.json'), JSON.stringify(tsconfig('Node16', 'Node16')));
    writeFileSync(path.join(dir, 'cjs/tsconfig.commonjs.json'), JSON.stringify(tsconfig('CommonJS', 'Node10')));
    await run('npm', ['install', '--no-audit', '--no-fund', `./${tarball}`], { cwd: dir });
    for (const consumer of Object.values(CONSUMERS)) writeFileSync(path.join(dir, consumer.file), consumer.source);
    // Type-checked and compiled: the ES module (NodeNext), the CommonJS one (node16).
    await run(node, [tsc, '-p', '.'], { cwd: dir });
    await run(node, [tsc, '-p', 'cjs'], { cwd: dir });
    proxy = await cuttingProxy(baseUrl());
  });

  after(async () => {
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('installs alone: its own dependencies only, with the licence', () => {
    const installed = readdirSync(path.join(dir, 'node_modules')).filter((name) => !name.startsWith('.'));
    expect(installed.sort()).to.deep.equal(['@signalboard', 'openapi-fetch', 'openapi-typescript-helpers']);
    const license = (where: string) => readFileSync(path.join(where, 'LICENSE'), 'utf8');
    expect(license(path.join(dir, 'node_modules/@signalboard/sdk')), 'the package carries the licence').to.equal(license(root));
  });

  it('serves CommonJS to require: the TypeScript consumer compiles to require(), and type-checks under module commonjs too', async () => {
    expect(readFileSync(path.join(dir, 'cjs/out/consumer.js'), 'utf8')).to.include('require("@signalboard/sdk")');
    await run(node, [tsc, '-p', 'cjs/tsconfig.commonjs.json', '--noEmit'], { cwd: dir });
  });

  for (const [name, consumer] of Object.entries(CONSUMERS)) {
    it(`${name}: resource calls, a SignalboardError with the server's request id, and a cut publish repeated and applied once`, async () => {
      const user = await signUp();
      const namespace = namespaceName('pkg');
      const { stdout } = await run(node, [consumer.run], {
        cwd: dir,
        env: { ...process.env, SB_URL: proxy.url, SB_TOKEN: user.token, SB_NAMESPACE: namespace },
      });
      const got = JSON.parse(stdout) as { event: string; error: { requestId: string } };
      const missing = proxy.passed.find((p) => p.path === `/v1/projects/${namespace}-missing`)!;
      expect(got).to.deep.equal({
        project: namespace,
        fetched: true,
        value: 3,
        event: got.event,
        titles: ['Healthy', 'Errors', 'Deploys'],
        error: { name: 'SignalboardApiError', status: 404, code: 'not_found', requestId: missing.requestId },
      });
      expect(missing.requestId).to.be.a('string');
      const version = (await run(node, ['--version'])).stdout.trim();
      expect(missing.userAgent).to.equal(`signalboard-sdk/${sdkVersion} node/${version}`);

      // The publish was applied, its answer cut, and repeated with the same key...
      const publishes = proxy.passed.filter((p) => p.method === 'POST' && p.path === `/v1/projects/${namespace}/feeds/general/events`);
      expect(publishes.map((p) => p.status)).to.deep.equal(['cut', 201]);
      expect(publishes[0]!.idempotencyKey).to.be.a('string').and.equal(publishes[1]!.idempotencyKey);
      // ...and the server applied it once, answering the repeat with the first event.
      const events = 'select count(*) from events e join projects p on p.id = e.project_id where p.namespace = ?';
      expect(await count(events, [namespace]), 'events stored for one publish').to.equal(1);
      expect(await count(`${events} and e.id = ?`, [namespace, got.event])).to.equal(1);
    });
  }

  it('refuses to compile misspelt, mistyped or undefined fields and wrong arguments, in the client and the low-level client', async () => {
    writeFileSync(path.join(dir, 'wrong.ts'), WRONG);
    const failed = await run(node, [tsc, '-p', '.', '--noEmit'], { cwd: dir }).then(
      () => undefined,
      (error: { stdout: string }) => error.stdout,
    );
    rmSync(path.join(dir, 'wrong.ts'));
    expect(failed, 'tsc accepted a wrong call').to.be.a('string');
    const lines = new Set([...failed!.matchAll(/wrong\.ts\((\d+),\d+\)/g)].map((m) => Number(m[1])));
    expect([...lines].sort((a, b) => a - b)).to.deep.equal([6, 7, 8, 9, 10, 11, 12, 13]);
    expect(failed).to.match(/wrong\.ts\(6,\d+\).*namspace/);
    expect(failed).to.match(/wrong\.ts\(7,\d+\).*colour/);
    expect(failed).to.match(/wrong\.ts\(12,\d+\).*colour/);
    expect(failed).to.match(/wrong\.ts\(13,\d+\).*tier/);
  });
});
