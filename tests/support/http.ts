/**
 * Calling the service and asserting its answers. Requests are put together by the conformance
 * package's `requestInit` (tools/src/conformance/http.ts), so a credential and a JSON body travel
 * exactly as the black-box suite sends them; every answer also goes through the contract check the
 * root hooks install (response-check.ts). The assertions are exact: the status, the whole envelope,
 * the error code, where the details point, and the Bearer challenge of a 401.
 */
import { expect } from 'chai';
import { parseJson, requestInit, type Request } from '../../tools/src/conformance/http.js';
import { baseUrl } from './harness.js';

export const DAY_MS = 86_400_000;
/** An id as the contract issues them: a UUID v7. */
export const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** A timestamp as the contract writes them: ISO-8601 in UTC. */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

export interface Answer {
  status: number;
  headers: Headers;
  /** The body as text; '' when there is none. */
  text: string;
  /** The body as JSON; undefined when it is empty or not JSON. */
  json: any;
}

/** One request to the service at `origin` (the run's own server, or one a test started); the whole answer is read. */
export async function send(origin: string, request: Request, options: { timeoutMs?: number } = {}): Promise<Answer> {
  const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
  const response = await fetch(origin + request.path, requestInit(request, signal ? { signal } : {}));
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: parseJson(text) };
}

/** A JSON call to the server at `origin` with an optional session or API token; `body` is serialised when present. */
export function callAt(
  origin: string,
  method: string,
  path: string,
  token?: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return send(origin, { method, path, headers, ...(token ? { token } : {}), ...(body !== undefined ? { json: body } : {}) });
}

/** A JSON call to the run's server with an optional session or API token; `body` is serialised when present. */
export function call(method: string, path: string, token?: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return callAt(baseUrl(), method, path, token, body, headers);
}

/** Raw HTTP to the run's server, for what a JSON call would hide: any header, malformed bodies, content types. */
export function http(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return send(baseUrl(), { method, path, headers: init.headers ?? {}, ...(init.body !== undefined ? { raw: { body: init.body } } : {}) });
}

function label(answer: Answer, what: string): string {
  return `${what} ${answer.status} ${answer.text}`.trim();
}

/** A 200/201 success envelope, exactly `{ success: true, data }`; answers its data. */
export function expectData(answer: Answer, status: 200 | 201 = 200, what = ''): any {
  expect(answer.status, label(answer, what)).to.equal(status);
  expect(Object.keys(answer.json ?? {}).sort(), label(answer, what)).to.deep.equal(['data', 'success']);
  expect(answer.json.success, label(answer, what)).to.equal(true);
  return answer.json.data;
}

/** A 204 with no body. */
export function expectNoContent(answer: Answer, what = ''): void {
  expect(answer.status, label(answer, what)).to.equal(204);
  expect(answer.text, label(answer, what)).to.equal('');
}

/**
 * The failure envelope, exactly: the status, `{ success: false, error }` with the code and a message,
 * `details` (a non-empty list of `{ path, message }`) on invalid_request and on nothing else, and
 * `WWW-Authenticate: Bearer` on a 401.
 */
export function expectError(answer: Answer, status: number, code: string, what = ''): void {
  const why = label(answer, what);
  expect(answer.status, why).to.equal(status);
  expect(answer.json, why).to.be.an('object');
  expect(Object.keys(answer.json).sort(), why).to.deep.equal(['error', 'success']);
  expect(answer.json.success, why).to.equal(false);
  expect(answer.json.error.code, why).to.equal(code);
  expect(answer.json.error.message, why).to.be.a('string').and.not.equal('');
  if (code === 'invalid_request') {
    expect(Object.keys(answer.json.error).sort(), why).to.deep.equal(['code', 'details', 'message']);
    expect(answer.json.error.details, why).to.be.an('array').that.is.not.empty;
    for (const detail of answer.json.error.details) {
      expect(Object.keys(detail).sort(), why).to.deep.equal(['message', 'path']);
      expect(detail.path, why).to.be.a('string');
      expect(detail.message, why).to.be.a('string').and.not.equal('');
    }
  } else {
    expect(Object.keys(answer.json.error).sort(), why).to.deep.equal(['code', 'message']);
  }
  if (status === 401) expect(answer.headers.get('www-authenticate'), why).to.equal('Bearer');
}

/** Where the details of a 400 invalid_request point, each path once. */
function detailPaths(answer: Answer, what: string): string[] {
  expectError(answer, 400, 'invalid_request', what);
  return [...new Set((answer.json.error.details as { path: string }[]).map((detail) => detail.path))];
}

/** A 400 invalid_request whose details all point at `path` (a JSON pointer such as /body/namespace). */
export function expectInvalid(answer: Answer, path: string, what = ''): void {
  expect(detailPaths(answer, what), label(answer, what)).to.deep.equal([path]);
}

/**
 * A 400 invalid_request with a detail pointing at `path` among details that may point elsewhere:
 * for a request that breaks more than one rule on purpose.
 */
export function expectInvalidAmong(answer: Answer, path: string, what = ''): void {
  expect(detailPaths(answer, what), label(answer, what)).to.include(path);
}

/** How many times each status came: `{ 201: 1, 409: 9 }`. */
export function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** `actual` is a time within `toleranceMs` of `expected` (ms since the epoch). */
export function expectCloseTo(actual: Date | string, expected: number, toleranceMs: number, what: string): void {
  const at = new Date(actual).getTime();
  expect(Number.isNaN(at), `${what} is a time`).to.equal(false);
  expect(Math.abs(at - expected), `${what}: ${new Date(actual).toISOString()} vs ${new Date(expected).toISOString()}`).to.be.at.most(
    toleranceMs,
  );
}

/** Follows next_cursor from the first page to the last; answers every page's items in order, and the page sizes. */
export async function walk(token: string, path: string, limit: number): Promise<{ items: any[]; pages: number[] }> {
  const items: any[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  for (let guard = 0; guard < 1000; guard++) {
    const query: string = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = expectData(await call('GET', path + query, token), 200, `page ${pages.length + 1} of ${path}`);
    expect(Object.keys(page).sort()).to.deep.equal(['items', 'next_cursor']);
    expect(page.items.length).to.be.at.most(limit);
    items.push(...page.items);
    pages.push(page.items.length);
    cursor = page.next_cursor;
    if (cursor === null) return { items, pages };
    expect(cursor).to.be.a('string').and.not.equal('');
  }
  throw new Error(`no last page after 1000 pages of ${path}`);
}
