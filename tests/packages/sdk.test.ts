/**
 * The SDK from source: its resource methods against the live server (answers, pages, errors with
 * the server's request id, what lands in the database), and its sending against stand-in servers
 * that answer as a test needs (429 with Retry-After, 503, 409 `idempotency_in_progress`, no answer,
 * a cut connection, a closed port): what is retried, with which Idempotency-Key, after how long,
 * and which SignalboardError each failure throws.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';
import {
  createRawClient,
  Signalboard,
  SignalboardAbortError,
  SignalboardApiError,
  SignalboardConnectionError,
  SignalboardError,
  SignalboardTimeoutError,
  VERSION,
  type SignalboardOptions,
  type StreamDisconnect,
} from '../../sdk/src/index.js';
import { clientMethods, sdkOperationsSource, type OpenApiDocument } from '../../scripts/sdk-methods.js';
import { baseUrl, count, secret, sql, startRateLimitedServer } from '../support/harness.js';
import { signUp } from '../support/accounts.js';
import { namespaceName } from '../support/projects.js';

const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What a fetch sent and what the service answered it, as a custom `fetch` records it. */
interface Exchange {
  method: string;
  headers: Headers;
  requestId?: string | null;
}

/** A fetch that records each exchange before handing it to the global fetch. */
function recordingFetch(): { fetch: typeof fetch; exchanges: Exchange[] } {
  const exchanges: Exchange[] = [];
  return {
    exchanges,
    fetch: async (input, init) => {
      const exchange: Exchange = { method: init?.method ?? 'GET', headers: new Headers(init?.headers) };
      exchanges.push(exchange);
      const response = await fetch(input, init);
      exchange.requestId = response.headers.get('X-Request-Id');
      return response;
    },
  };
}

/** The last program compileErrors made: the next reuses its unchanged files (the contract's types are most of the time). */
let lastProgram: ts.Program | undefined;

/**
 * Type-checks sdk/src/generated/operations.ts as if it held `source` (in memory: the file on disk is
 * untouched), with the SDK's compiler options, and answers each error's line of source.
 */
function compileErrors(source: string): string[] {
  const file = path.resolve('sdk/src/generated/operations.ts');
  const config = ts.getParsedCommandLineOfConfigFile(
    path.resolve('sdk/tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  )!;
  const host = ts.createCompilerHost(config.options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) =>
    path.resolve(name) === file ? ts.createSourceFile(name, source, version) : read(name, version, ...rest);
  const program = ts.createProgram([file], { ...config.options, noEmit: true }, host, lastProgram);
  lastProgram = program;
  const lines = source.split('\n');
  return ts.getPreEmitDiagnostics(program).map((d) => {
    if (!d.file || path.resolve(d.file.fileName) !== file)
      return `${d.file?.fileName ?? 'options'}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    return lines[d.file.getLineAndCharacterOfPosition(d.start!).line]!.trim();
  });
}

async function failure(promise: Promise<unknown>): Promise<SignalboardError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected a failure, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.error).to.be.instanceOf(SignalboardError);
  return outcome.error as SignalboardError;
}

describe('SDK: resource methods against the server', function () {
  this.timeout(60_000);

  it("has a method for every operation of the contract but the Stripe webhook and LogSnag's routes", () => {
    const document = JSON.parse(readFileSync('spec/generated/openapi.json', 'utf8')) as OpenApiDocument;
    const methods = clientMethods(document);
    const operations = Object.values(document.paths).flatMap((item) =>
      Object.values(item as Record<string, { operationId?: string }>).flatMap((op) => (op.operationId ? [op.operationId] : [])),
    );
    // LogSnag's routes are for LogSnag's own clients (spec/logsnag.tsp): the SDK covers them with its native methods.
    const logsnag = ['logsnagLog', 'logsnagSetInsight', 'logsnagIncrementInsight', 'logsnagIdentify'];
    expect(operations).to.include.members(logsnag);
    expect([...methods.keys()].sort()).to.deep.equal(operations.filter((id) => id !== 'stripeWebhook' && !logsnag.includes(id)).sort());
    const sb = new Signalboard({ baseUrl: baseUrl() }) as unknown as Record<string, Record<string, unknown>>;
    const missing = [...methods.values()].filter((name) => {
      const [resource, method] = name.split('.') as [string, string];
      return typeof sb[resource]?.[method] !== 'function';
    });
    expect(missing).to.deep.equal([]);
    expect(methods.get('createProject')).to.equal('projects.create');
    expect(methods.get('publishEvents')).to.equal('events.publishBatch');
    expect(methods.get('streamEvents')).to.equal('events.stream');
    // A leading `get` goes when something follows it; a bare one stays.
    expect(['getRoot', 'getHealth', 'getReadiness', 'getOpenApi', 'getProject'].map((id) => methods.get(id))).to.deep.equal([
      'meta.root',
      'meta.health',
      'meta.readiness',
      'meta.openApi',
      'projects.get',
    ]);
  });

  it("names every resource in the READMEs' lists: the root README's SDK section and sdk/README.md's Methods", () => {
    const document = JSON.parse(readFileSync('spec/generated/openapi.json', 'utf8')) as OpenApiDocument;
    const resources = [...new Set([...clientMethods(document).values()].map((name) => name.split('.')[0]!))];
    expect(resources).to.include.members(['sessions', 'endUsers']);
    /** The text of `file` from the heading `from` to the next heading of its level. */
    const section = (file: string, from: string) => {
      const text = readFileSync(file, 'utf8');
      const start = text.indexOf(`\n${from}\n`);
      expect(start, `${from} in ${file}`).to.be.above(-1);
      const level = from.split(' ')[0]!;
      const end = text.indexOf(`\n${level} `, start + from.length + 2);
      return text.slice(start, end < 0 ? undefined : end);
    };
    for (const [file, heading] of [
      ['README.md', '## The SDK'],
      ['sdk/README.md', '## Methods'],
    ] as const) {
      const text = section(file, heading);
      expect(
        resources.filter((resource) => !text.includes(`\`${resource}\``)),
        `resources ${file} does not name`,
      ).to.deep.equal([]);
    }
  });

  it('generates a new route as a method, and refuses one it cannot name, two with one name, or an override of nothing', () => {
    const contract = () => JSON.parse(readFileSync('spec/generated/openapi.json', 'utf8')) as OpenApiDocument;
    const operation = (operationId: string, tags?: string[]) => ({
      get: {
        operationId,
        ...(tags ? { tags } : {}),
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { 204: { description: 'done' } },
      },
    });
    const withRoute = (path: string, item: unknown) => {
      const document = contract();
      document.paths[path] = item as Record<string, unknown>;
      return document;
    };
    expect(sdkOperationsSource(withRoute('/v1/widgets/{id}', operation('getWidget', ['Widgets'])))).to.include(
      "this.widgets = {\n      get: (id, options) =>\n        caller.call({ method: 'GET', path: '/v1/widgets/{id}' }, { path: { id } }, options),",
    );
    expect(sdkOperationsSource(withRoute('/v1/widgets/{id}/usage', operation('getUsage', ['Widgets'])))).to.include(
      'this.widgets = {\n      usage: (id, options) =>',
    );
    expect(() => sdkOperationsSource(withRoute('/v1/widgets/{id}', operation('getWidgets')))).to.throw(/getWidgets\) has no tag/);
    expect(() => sdkOperationsSource(withRoute('/v1/widgets/{id}', operation('getProjects', ['Projects'])))).to.throw(
      /getProject and getProjects are both projects\.get/,
    );
    const withoutWebhook = contract();
    delete withoutWebhook.paths['/v1/billing/webhook'];
    expect(() => sdkOperationsSource(withoutWebhook)).to.throw(/names operations the contract lacks: stripeWebhook/);
  });

  it('declares path parameters as plain types, each held to the contract: one that drifts fails to compile', function () {
    this.timeout(60_000);
    const contract = () => JSON.parse(readFileSync('spec/generated/openapi.json', 'utf8')) as OpenApiDocument;
    const source = sdkOperationsSource(contract());
    expect(source).to.include("publish(namespace: string, feed: string, body: Body<'publishEvent'>, options?: RequestOptions)");
    expect(source.split('export class Resources')[0]).not.to.match(/^ {2}\w+\(.*PathParam</m);
    expect(source).to.include("Expect<Equal<string, PathParam<'publishEvent', 'feed'>>>,");
    expect(compileErrors(source)).to.deep.equal([]);
    // The document says getProject's namespace is one value, the contract's types (openapi.ts) still say string.
    const drifted = contract();
    const getProject = drifted.paths['/v1/projects/{namespace}']!.get as { parameters: unknown[] };
    getProject.parameters[0] = { name: 'namespace', in: 'path', required: true, schema: { type: 'string', enum: ['acme'] } };
    const driftedSource = sdkOperationsSource(drifted);
    expect(driftedSource).to.include('get(namespace: "acme", options?: RequestOptions)');
    expect(compileErrors(driftedSource)).to.deep.equal([`Expect<Equal<"acme", PathParam<'getProject', 'namespace'>>>,`]);
    // A path parameter that is no string has no place in a path the SDK fills: generation refuses it.
    getProject.parameters[0] = { name: 'namespace', in: 'path', required: true, schema: { type: 'integer' } };
    expect(() => sdkOperationsSource(drifted)).to.throw(
      /GET \/v1\/projects\/\{namespace\} \{namespace\}: the SDK fills path parameters with strings/,
    );
  });

  it('creates, reads and changes a project, pages through insights, increments one, and deletes one', async () => {
    const owner = await signUp();
    const { fetch, exchanges } = recordingFetch();
    const sb = new Signalboard({ baseUrl: baseUrl(), token: owner.token, fetch });
    const namespace = namespaceName('sdk');
    const project = await sb.projects.create({ name: 'From the SDK', namespace });
    expect(project).to.include({ name: 'From the SDK', namespace, tier: 0 });
    expect(await sb.projects.get(namespace)).to.deep.equal(project);
    expect(await sb.projects.update(namespace, { name: 'Renamed' })).to.include({ id: project.id, name: 'Renamed' });
    expect(await sb.users.me()).to.include({ username: owner.username });

    const created = [];
    for (let i = 0; i < 7; i++) created.push(await sb.insights.create(namespace, { title: `n${i}`, value: i }));
    const newestFirst = created.map((insight) => insight.id).reverse();
    const seen: string[] = [];
    for await (const insight of sb.insights.list(namespace, { limit: 3 })) seen.push(insight.id);
    expect(seen).to.deep.equal(newestFirst);
    const sizes: number[] = [];
    for await (const page of sb.insights.list(namespace, { limit: 3 }).pages()) sizes.push(page.items.length);
    expect(sizes).to.deep.equal([3, 3, 1]);
    const first = await sb.insights.list(namespace, { limit: 3 }).page();
    expect(first.items.map((i) => i.id)).to.deep.equal(newestFirst.slice(0, 3));
    const second = await sb.insights.list(namespace, { limit: 3, cursor: first.next_cursor! }).page();
    expect(second.items.map((i) => i.id)).to.deep.equal(newestFirst.slice(3, 6));

    const counter = created[2]!;
    expect(await sb.insights.increment(namespace, counter.id)).to.include({ id: counter.id, value: 3 });
    expect(await sb.insights.increment(namespace, counter.id, 2.5)).to.include({ value: 5.5 });
    expect(await sql('select value from insights where id = ?', [counter.id])).to.deep.equal([{ value: 5.5 }]);
    expect(await sb.insights.delete(namespace, created[0]!.id)).to.equal(undefined);
    expect(await count('select count(*) from insights where project_id = ?', [project.id])).to.equal(6);

    // Each POST and PATCH carried a fresh UUID v4 as its Idempotency-Key; no GET or DELETE did.
    const writes = exchanges.filter((e) => e.method === 'POST' || e.method === 'PATCH');
    expect(writes).to.have.length(11);
    const keys = writes.map((e) => e.headers.get('Idempotency-Key'));
    for (const key of keys) expect(key).to.match(UUID4);
    expect(new Set(keys).size).to.equal(keys.length);
    expect(exchanges.filter((e) => e.method === 'GET' || e.method === 'DELETE').map((e) => e.headers.get('Idempotency-Key'))).to.satisfy(
      (values: unknown[]) => values.every((v) => v === null),
    );
    expect(exchanges[0]!.headers.get('User-Agent')).to.equal(`signalboard-sdk/${VERSION} node/${process.version}`);
  });

  it('logs in and mints an API token without an Idempotency-Key (the service takes none there), lists and revokes tokens', async () => {
    const owner = await signUp();
    const { fetch, exchanges } = recordingFetch();
    const anonymous = new Signalboard({ baseUrl: baseUrl(), fetch });
    const session = await anonymous.auth.login({ login: owner.username, password: owner.password });
    secret(session.token);
    expect(exchanges[0]!.headers.has('Idempotency-Key')).to.equal(false);
    const sb = new Signalboard({ baseUrl: baseUrl(), token: session.token, fetch });
    const minted = await sb.tokens.create({ name: 'sdk test' });
    secret(minted.token);
    expect(exchanges[1]!.headers.has('Idempotency-Key')).to.equal(false);
    const names: string[] = [];
    for await (const token of sb.tokens.list()) names.push(token.name);
    expect(names).to.deep.equal(['sdk test']);
    expect(await sb.tokens.delete(minted.id)).to.equal(undefined);
  });

  it('withToken: a new client with the same settings and the token a login answered, the first one unchanged', async () => {
    const owner = await signUp();
    const { fetch, exchanges } = recordingFetch();
    const anonymous = new Signalboard({ baseUrl: baseUrl(), fetch, timeout: 5_000, headers: { 'X-Request-Id': 'with-token' } });
    const token = secret((await anonymous.auth.login({ login: owner.username, password: owner.password })).token);
    const sb = anonymous.withToken(token);
    expect(sb).to.be.instanceOf(Signalboard).and.not.equal(anonymous);
    expect(await sb.users.me()).to.include({ username: owner.username });
    // The same fetch and headers: the recording fetch saw the call, with the client's header and the new credential.
    expect(exchanges).to.have.length(2);
    expect(exchanges[1]!.headers.get('Authorization')).to.equal(`Bearer ${token}`);
    expect(exchanges[1]!.requestId).to.equal('with-token');
    // The first client still has no credential.
    expect(await failure(anonymous.users.me())).to.include({ status: 401, code: 'unauthenticated' });
    expect(exchanges[2]!.headers.has('Authorization')).to.equal(false);
    // A second withToken replaces the credential rather than adding one.
    const other = await signUp();
    expect(await sb.withToken(other.token).users.me()).to.include({ username: other.username });
    for (const wrong of ['', undefined]) expect(() => anonymous.withToken(wrong as string)).to.throw(SignalboardError, /token must be/);
  });

  it('.withResponse() on any call: its data with the answer’s status, headers and request id, for 201, 200, 204 and a list’s page', async () => {
    const owner = await signUp();
    const { fetch, exchanges } = recordingFetch();
    const sb = new Signalboard({ baseUrl: baseUrl(), token: owner.token, fetch });
    const namespace = namespaceName('sdk');
    const created = await sb.projects.create({ name: 'Heads', namespace }).withResponse();
    expect(created.data).to.include({ name: 'Heads', namespace });
    expect(created.response).to.include({ status: 201, requestId: exchanges.at(-1)!.requestId, rateLimit: undefined });
    expect(created.response.requestId).to.be.a('string');
    expect(created.response.headers.get('Content-Type')).to.match(/^application\/json/);
    const read = await sb.projects.get(namespace).withResponse();
    expect(read.data).to.deep.equal(created.data);
    expect(read.response.status).to.equal(200);
    expect(read.response.headers.get('ETag')).to.be.a('string');

    const insight = await sb.insights.create(namespace, { title: 'gone soon', value: 1 });
    const deleted = await sb.insights.delete(namespace, insight.id).withResponse();
    expect(deleted).to.have.property('data', undefined);
    expect(deleted.response).to.include({ status: 204, requestId: exchanges.at(-1)!.requestId });
    const increment = await sb.insights.create(namespace, { title: 'n', value: 1 });
    expect((await sb.insights.increment(namespace, increment.id).withResponse()).data).to.include({ value: 2 });

    const page = await sb.projects.list({ limit: 1 }).page().withResponse();
    expect(page.data.items.map((p) => p.namespace)).to.deep.equal([namespace]);
    expect(page.response).to.include({ status: 200, requestId: exchanges.at(-1)!.requestId });

    // Awaited without it, a call is its data, as before; a refusal rejects whichever way it is awaited,
    // and one awaited through withResponse() leaves no other rejection unhandled.
    expect(await sb.projects.get(namespace)).to.deep.equal(created.data);
    expect(await sb.projects.get(namespace).then((project) => project.name)).to.equal('Heads');
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      expect(await failure(sb.projects.get('no-such-project').withResponse())).to.include({ status: 404, code: 'not_found' });
      expect(await failure(sb.projects.get('no-such-project'))).to.include({ status: 404, code: 'not_found' });
      expect(await sb.projects.get('no-such-project').catch((error: SignalboardError) => error.code)).to.equal('not_found');
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).to.deep.equal([]);
  });

  it('.withResponse() reads the rate limit the service reports (RateLimit-*), and none on a route it does not count', async function () {
    this.timeout(60_000);
    const limited = await startRateLimitedServer({ API_RATE_LIMIT: '5', HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' });
    try {
      const sb = new Signalboard({ baseUrl: limited.url });
      const first = await sb.meta.root().withResponse();
      expect(first.response.rateLimit).to.include({ limit: 5, remaining: 4 });
      expect(first.response.rateLimit!.reset).to.be.within(1, 60);
      expect((await sb.meta.root().withResponse()).response.rateLimit).to.include({ limit: 5, remaining: 3 });
      // Liveness is for load balancers, never counted.
      expect((await sb.meta.health().withResponse()).response).to.include({ status: 200, rateLimit: undefined });
    } finally {
      await limited.close();
    }
  });

  it('throws a SignalboardApiError with the status, the envelope and the request id the server answered with', async () => {
    const { fetch, exchanges } = recordingFetch();
    const sb = new Signalboard({ baseUrl: baseUrl(), token: (await signUp()).token, fetch });
    const missing = await failure(sb.projects.get('no-such-project'));
    expect(missing).to.be.instanceOf(SignalboardApiError);
    expect(missing).to.include({ name: 'SignalboardApiError', status: 404, code: 'not_found', retryAfter: undefined });
    expect(missing.requestId).to.be.a('string').and.equal(exchanges.at(-1)!.requestId);
    expect(exchanges).to.have.length(1); // a 404 is not retried

    const invalid = await failure(sb.projects.create({ name: '', namespace: 'x' }));
    expect(invalid).to.include({ status: 400, code: 'invalid_request' });
    expect(invalid.details?.map((d) => d.path)).to.include.members(['/body/name', '/body/namespace']);
  });

  it('refuses a path parameter that is empty, . or .., which would reach another route, and sends nothing', async () => {
    const owner = await signUp();
    const { fetch, exchanges } = recordingFetch();
    const sb = new Signalboard({ baseUrl: baseUrl(), token: owner.token, fetch });
    const namespace = namespaceName('sdk');
    await sb.projects.create({ name: 'Kept', namespace });
    for (const id of ['..', '.', '']) {
      const refused = await failure(sb.insights.delete(namespace, id));
      expect(refused).to.include({ status: 0, code: 'invalid_argument' });
    }
    expect(exchanges).to.have.length(1);
    expect(await sb.projects.get(namespace)).to.include({ name: 'Kept' });
    // Other values are percent-encoded into one segment: the insight route refuses the id, nothing else is reached.
    expect(await failure(sb.insights.delete(namespace, '../x'))).to.include({ status: 400, code: 'invalid_request' });
  });

  it('keeps the low-level client: typed by path, answering every status as { data, error, response }', async () => {
    const owner = await signUp();
    const raw = createRawClient({ baseUrl: baseUrl(), token: owner.token });
    const me = await raw.GET('/v1/users/me');
    expect(me.data?.data.username).to.equal(owner.username);
    const missing = await raw.GET('/v1/projects/{namespace}', { params: { path: { namespace: 'no-such-project' } } });
    expect(missing.response.status).to.equal(404);
    expect(missing.error?.error.code).to.equal('not_found');
  });
});

/** How a stand-in answers one request. */
type Reply = (request: http.IncomingMessage, response: http.ServerResponse) => void;

interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  at: number;
}

const answer =
  (status: number, body: unknown, headers: Record<string, string> = {}): Reply =>
  (_request, response) => {
    response.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': `stand-in-${status}`, ...headers });
    response.end(JSON.stringify(body));
  };
const refusal = (status: number, code: string, headers: Record<string, string> = {}) =>
  answer(status, { success: false, error: { code, message: `refused: ${code}` } }, headers);
const success = (status = 200) => answer(status, { success: true, data: { status: 'ok' } });
/** Reads the request, then closes the connection without answering: the request arrived, its answer is lost. */
const cut: Reply = (request) => request.socket.destroy();
/** Never answers. */
const silent: Reply = () => undefined;

/**
 * A server on a free port that answers the n-th request with `replies[n]` (the last one again once
 * they run out) and keeps what it received. Its URL has a path prefix, as a client's base URL may:
 * so too its answers stay outside the suite's contract check, which judges the service's paths.
 */
async function standIn(...replies: Reply[]) {
  const received: Received[] = [];
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received.push({ method: request.method!, path: request.url!, headers: request.headers, at: performance.now() });
      replies[Math.min(received.length, replies.length) - 1]!(request, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/stand-in`;
  return {
    received,
    client: (options: Partial<SignalboardOptions> = {}) => new Signalboard({ baseUrl: url, token: 'api_test', ...options }),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('SDK: retries, timeouts and errors', function () {
  this.timeout(30_000);
  const stands: { close(): Promise<void> }[] = [];
  const stand = async (...replies: Reply[]) => {
    const made = await standIn(...replies);
    stands.push(made);
    return made;
  };
  afterEach(async () => {
    await Promise.all(stands.splice(0).map((s) => s.close()));
  });

  it('repeats a GET answered 429 after the Retry-After it asked for', async () => {
    const s = await stand(refusal(429, 'rate_limited', { 'Retry-After': '1' }), success());
    const started = performance.now();
    expect(await s.client().meta.health()).to.deep.equal({ status: 'ok' });
    expect(s.received).to.have.length(2);
    expect(s.received[1]!.at - started).to.be.at.least(1000);
  });

  it('repeats a 503 with exponential backoff, at most maxRetries times, then throws it with its request id', async () => {
    const s = await stand(refusal(503, 'unavailable'), refusal(503, 'unavailable'), success());
    expect(await s.client().meta.health()).to.deep.equal({ status: 'ok' });
    expect(s.received).to.have.length(3);
    // Full jitter: a random wait up to 0.5 s, then up to 1 s.
    expect(s.received[1]!.at - s.received[0]!.at).to.be.below(600);
    expect(s.received[2]!.at - s.received[1]!.at).to.be.below(1100);

    const t = await stand(refusal(503, 'unavailable', { 'Retry-After': '1' }));
    const error = await failure(t.client({ maxRetries: 1 }).meta.health());
    expect(error).to.be.instanceOf(SignalboardApiError);
    expect(error).to.include({
      status: 503,
      code: 'unavailable',
      message: 'refused: unavailable',
      requestId: 'stand-in-503',
      retryAfter: 1,
    });
    expect(t.received).to.have.length(2);
    await failure(t.client().meta.health({ maxRetries: 0 }));
    expect(t.received).to.have.length(3);
  });

  it('.withResponse() of a repeated call is its last answer’s head; a partial or malformed RateLimit set reads as none', async () => {
    const limits = { 'RateLimit-Limit': '100', 'RateLimit-Remaining': '7', 'RateLimit-Reset': '30' };
    const s = await stand(refusal(503, 'unavailable'), answer(200, { success: true, data: { status: 'ok' } }, limits));
    const { data, response } = await s.client().meta.health().withResponse();
    expect(data).to.deep.equal({ status: 'ok' });
    expect(response).to.deep.include({ status: 200, requestId: 'stand-in-200', rateLimit: { limit: 100, remaining: 7, reset: 30 } });
    expect(s.received).to.have.length(2);
    const t = await stand(
      answer(200, { success: true, data: {} }, { 'RateLimit-Limit': '100' }),
      answer(200, { success: true, data: {} }, { ...limits, 'RateLimit-Remaining': 'lots' }),
    );
    expect((await t.client().meta.health().withResponse()).response.rateLimit).to.equal(undefined);
    expect((await t.client().meta.health().withResponse()).response.rateLimit).to.equal(undefined);
  });

  it('does not wait for a Retry-After over 60 s: throws at once with retryAfter', async () => {
    const s = await stand(refusal(429, 'rate_limited', { 'Retry-After': '120' }));
    expect(await failure(s.client().meta.health())).to.include({ status: 429, code: 'rate_limited', retryAfter: 120 });
    expect(s.received).to.have.length(1);
  });

  it('repeats a POST with the same Idempotency-Key on 503, on 409 idempotency_in_progress and after a cut connection', async () => {
    const s = await stand(refusal(503, 'unavailable'), refusal(409, 'idempotency_in_progress'), cut, success(201));
    expect(await s.client({ maxRetries: 3 }).projects.create({ name: 'x', namespace: 'xyz' })).to.deep.equal({ status: 'ok' });
    expect(s.received.map((r) => r.method)).to.deep.equal(['POST', 'POST', 'POST', 'POST']);
    const keys = s.received.map((r) => r.headers['idempotency-key']);
    expect(keys[0]).to.match(UUID4);
    expect(new Set(keys)).to.deep.equal(new Set([keys[0]]));

    const t = await stand(refusal(503, 'unavailable'), success(201));
    await t.client().projects.create({ name: 'x', namespace: 'xyz' }, { idempotencyKey: 'order-42' });
    expect(t.received.map((r) => r.headers['idempotency-key'])).to.deep.equal(['order-42', 'order-42']);
  });

  it('sends a POST without a key once: when the caller opts out, or the operation takes none (login)', async () => {
    const s = await stand(refusal(503, 'unavailable'));
    expect(await failure(s.client().projects.create({ name: 'x', namespace: 'xyz' }, { idempotencyKey: null }))).to.include({
      status: 503,
    });
    expect(s.received).to.have.length(1);
    expect(s.received[0]!.headers).not.to.have.property('idempotency-key');
    expect(await failure(s.client().auth.login({ login: 'ada', password: 'pw' }))).to.include({ status: 503 });
    expect(s.received).to.have.length(2);

    const t = await stand(cut, success(201));
    const lost = await failure(t.client().projects.create({ name: 'x', namespace: 'xyz' }, { idempotencyKey: null }));
    expect(lost).to.be.instanceOf(SignalboardConnectionError);
    expect(lost).to.include({ status: 0, code: 'network_error' });
    expect(t.received).to.have.length(1); // it may have been applied: not repeated
  });

  it('repeats any request that was never sent (connection refused), and throws a SignalboardConnectionError with the cause', async () => {
    const s = await stand(success());
    await s.close();
    const { fetch, exchanges } = recordingFetch();
    const error = await failure(s.client({ fetch }).projects.create({ name: 'x', namespace: 'xyz' }, { idempotencyKey: null }));
    expect(exchanges).to.have.length(3);
    expect(error).to.be.instanceOf(SignalboardConnectionError).and.not.instanceOf(SignalboardTimeoutError);
    expect(error).to.include({ name: 'SignalboardConnectionError', status: 0, code: 'network_error', requestId: undefined });
    expect(error.message).to.match(/^Could not reach http:\/\/127\.0\.0\.1:\d+: connect ECONNREFUSED/);
    expect((error.cause as { cause?: { code?: string } }).cause?.code).to.equal('ECONNREFUSED');
  });

  it('times out an attempt that gets no whole answer, per client or per call, and repeats it when safe', async () => {
    const s = await stand(silent);
    const started = performance.now();
    const error = await failure(s.client({ timeout: 200, maxRetries: 0 }).meta.health());
    expect(error).to.be.instanceOf(SignalboardTimeoutError).and.instanceOf(SignalboardConnectionError);
    expect(error).to.include({ status: 0, code: 'timeout' });
    expect(performance.now() - started).to.be.within(190, 1000);
    await failure(s.client({ maxRetries: 1 }).meta.health({ timeout: 100 }));
    expect(s.received).to.have.length(3);

    // A head without its body is no whole answer either.
    const stalled: Reply = (_request, response) => {
      response.writeHead(200, { 'Content-Type': 'application/json' });
      response.write('{"success":true,');
    };
    const t = await stand(stalled);
    expect(await failure(t.client({ timeout: 300, maxRetries: 0 }).meta.health())).to.include({ code: 'timeout' });
  });

  it('ends a call at once when its signal aborts, waits between attempts included', async () => {
    const s = await stand(refusal(429, 'rate_limited', { 'Retry-After': '30' }));
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('enough')), 200);
    const started = performance.now();
    const error = await failure(s.client().meta.health({ signal: controller.signal }));
    expect(performance.now() - started).to.be.below(1000);
    expect(error).to.be.instanceOf(SignalboardAbortError);
    expect(error).to.include({ status: 0, code: 'aborted' });
    expect((error.cause as Error).message).to.equal('enough');
    expect(s.received).to.have.length(1);
  });

  it('ends a list the same way: a SignalboardAbortError at its next item or page, or at once while a page is fetched', async () => {
    const page = (ids: string[], next: string | null) =>
      answer(200, { success: true, data: { items: ids.map((id) => ({ id })), next_cursor: next } });
    const s = await stand(page(['a', 'b', 'c'], 'c1'), page(['d'], null));
    const controller = new AbortController();
    const seen: string[] = [];
    const walk = async (signal: AbortSignal) => {
      for await (const project of s.client().projects.list(undefined, { signal })) {
        seen.push(project.id);
        if (seen.length === 1) controller.abort(new Error('enough'));
      }
    };
    const error = await failure(walk(controller.signal));
    expect(error).to.be.instanceOf(SignalboardAbortError);
    expect((error.cause as Error).message).to.equal('enough');
    expect(seen).to.deep.equal(['a']); // not b and c, already fetched
    expect(s.received).to.have.length(1);

    const pages = new AbortController();
    const t = await stand(page(['a'], 'c1'), page(['b'], null));
    const walked: number[] = [];
    const paging = (async () => {
      for await (const one of t.client().projects.list(undefined, { signal: pages.signal }).pages()) {
        walked.push(one.items.length);
        pages.abort();
      }
    })();
    expect(await failure(paging)).to.be.instanceOf(SignalboardAbortError);
    expect(walked).to.deep.equal([1]);
    expect(t.received).to.have.length(1);

    const u = await stand(page(['a'], 'c1'), silent);
    const fetching = new AbortController();
    const started = performance.now();
    const stalled = failure(
      (async () => {
        for await (const project of u.client().projects.list(undefined, { signal: fetching.signal })) seen.push(project.id);
      })(),
    );
    setTimeout(() => fetching.abort(), 200);
    expect(await stalled).to.be.instanceOf(SignalboardAbortError);
    expect(performance.now() - started).to.be.below(1000);
    expect(u.received).to.have.length(2);
  });

  it('ends the stream the same way: a SignalboardAbortError, connecting nowhere when already aborted, or while waiting to reconnect', async () => {
    const s = await stand(refusal(503, 'unavailable', { 'Retry-After': '30' }));
    const before = await failure(
      s
        .client()
        .events.stream('acme', { signal: AbortSignal.abort(new Error('early')) })
        .next(),
    );
    expect(before).to.be.instanceOf(SignalboardAbortError);
    expect((before.cause as Error).message).to.equal('early');
    expect(s.received).to.have.length(0);

    const controller = new AbortController();
    const drops: number[] = [];
    const waiting = s
      .client()
      .events.stream('acme', { signal: controller.signal, onDisconnect: () => drops.push(performance.now()) })
      .next();
    setTimeout(() => controller.abort(new Error('enough')), 300);
    const error = await failure(waiting);
    expect(error).to.be.instanceOf(SignalboardAbortError);
    expect(error).to.include({ status: 0, code: 'aborted' });
    expect(performance.now() - drops[0]!).to.be.below(1000); // not the 30 s Retry-After
    expect(s.received).to.have.length(1);
  });

  it('onDisconnect says why, by kind: status (a 503, waiting its Retry-After), closed (the service ended it), network (cut, refused)', async () => {
    /** A stream that asks for 50 ms between connections, sends `events`, then ends (or is cut, or stays open). */
    const sse =
      (end: 'end' | 'cut' | 'open', ...events: string[]): Reply =>
      (request, response) => {
        response.writeHead(200, { 'Content-Type': 'text/event-stream', 'X-Request-Id': 'stand-in-sse' });
        response.write(`retry: 50\n\n${events.map((id) => `id: ${id}\nevent: event\ndata: {"id":"${id}"}\n\n`).join('')}`);
        if (end === 'end') response.end();
        else if (end === 'cut') setTimeout(() => request.socket.destroy(), 20);
      };
    const s = await stand(refusal(503, 'unavailable', { 'Retry-After': '1' }), sse('end', 'e1'), sse('cut'), sse('open', 'e2'));
    const reasons: StreamDisconnect[] = [];
    const seen: string[] = [];
    for await (const event of s.client().events.stream('acme', { onDisconnect: (reason) => reasons.push(reason) })) {
      seen.push(event.id);
      if (event.id === 'e2') break;
    }
    expect(seen).to.deep.equal(['e1', 'e2']);
    expect(reasons.map((reason) => [reason.kind, reason.retryInMs])).to.deep.equal([
      ['status', 1000],
      ['closed', 50],
      ['network', 50],
    ]);
    const [status, , network] = reasons;
    if (status?.kind !== 'status' || network?.kind !== 'network') throw new Error('the kinds narrow the reason');
    expect(status.status).to.equal(503);
    expect(status.error).to.be.instanceOf(SignalboardApiError);
    expect(status.error).to.include({ code: 'unavailable', requestId: 'stand-in-503', retryAfter: 1 });
    expect(network.error).to.be.instanceOf(SignalboardConnectionError);
    expect(network.error).to.include({ code: 'network_error', status: 0 });
    expect(s.received.map((r) => r.headers['last-event-id'])).to.deep.equal([undefined, undefined, 'e1', 'e1']);

    // A connection that cannot be made at all.
    const t = await stand(success());
    await t.close();
    const controller = new AbortController();
    const refused: StreamDisconnect[] = [];
    const ended = failure(
      t
        .client()
        .events.stream('acme', {
          signal: controller.signal,
          retryMs: 50,
          onDisconnect: (reason) => {
            refused.push(reason);
            controller.abort();
          },
        })
        .next(),
    );
    expect(await ended).to.be.instanceOf(SignalboardAbortError);
    expect(refused).to.have.length(1);
    expect(refused[0]).to.include({ kind: 'network', retryInMs: 50 });
    const error = (refused[0] as Extract<StreamDisconnect, { kind: 'network' }>).error;
    expect(error.message).to.match(/^Could not reach http:\/\/127\.0\.0\.1:\d+: connect ECONNREFUSED/);
  });

  it('reads an answer that is not the contract’s as unexpected_response', async () => {
    const html: Reply = (_request, response) => {
      response.writeHead(502, { 'Content-Type': 'text/html' });
      response.end('<h1>Bad gateway</h1>');
    };
    const s = await stand(html, answer(200, { not: 'an envelope' }));
    expect(await failure(s.client().projects.delete('acme'))).to.include({ status: 502, code: 'unexpected_response' });
    expect(await failure(s.client().projects.get('acme'))).to.include({ status: 200, code: 'unexpected_response' });
  });

  it('refuses options it cannot honour', () => {
    expect(() => new Signalboard({ baseUrl: 'localhost:3000' })).to.throw(SignalboardError, /baseUrl/);
    expect(() => new Signalboard({ baseUrl: 'http://localhost', maxRetries: -1 })).to.throw(SignalboardError, /maxRetries/);
    expect(() => new Signalboard({ baseUrl: 'http://localhost', timeout: 0 })).to.throw(SignalboardError, /timeout/);
  });
});
