/**
 * Generated requests: fast-check draws requests to every operation of the contract (operations.ts),
 * most of them broken on purpose (wrong types, missing and extra fields, huge and unicode strings,
 * bad path parameters, bad and duplicated headers, broken JSON, wrong methods), half of them with a
 * valid session token so that the handlers are reached and not only the credential check. The body
 * comes from the operation's schema (values.ts), broken or not (bodies.ts); this module puts the
 * method, path, query and headers around it.
 *
 * Requests hold placeholders (`@@S@@` for the session token, `@@NS@@` for the fixture project, …)
 * resolved at send time against the fixture (fixture.ts).
 */
import fc from 'fast-check';
import type { OpenAPIV3 } from 'openapi-types';
import type { ContractModel } from '../../../tools/src/conformance/contract.js';
import { invalidUtf8, mutatedBody } from './bodies.js';
import { operationsOf, type FuzzOperation } from './operations.js';
import { anyJson, anyString, fromSchema, OPERATION_PROPERTIES, SPECIAL_PROPERTIES, unicodeString } from './values.js';

export interface FuzzRequest {
  op: string;
  method: string;
  /** Path and query as sent, with placeholders. */
  path: string;
  headers: [string, string][];
  body?: string;
  /** Send the body's bytes as given (latin1: one byte per character), e.g. for invalid UTF-8. */
  rawBytes?: boolean;
  /** Chunked transfer encoding instead of Content-Length. */
  chunked?: boolean;
}

/** Percent-encodes every byte of the UTF-8 form that is not unreserved (lone surrogates become U+FFFD). */
export function percentEncode(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9._~-]/.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const latin1Char = fc
  .integer({ min: 0x20, max: 0xff })
  .filter((c) => c !== 0x7f)
  .map((c) => String.fromCharCode(c));
/**
 * Printable ASCII but the space: what may stand raw in a request line (Node's own parser refuses raw
 * bytes above 0x7E there with a bare 400).
 */
const asciiChar = fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c));
/** Header-safe junk: printable ASCII and Latin-1 bytes (what a client sending raw UTF-8 puts on the wire). */
const headerJunk = fc.oneof(
  fc.string({ unit: latin1Char, maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => Buffer.from(s, 'utf8').toString('latin1')),
  fc.integer({ min: 1000, max: 8000 }).map((n) => 'x'.repeat(n)),
);

const PATH_BAD_VALUES = [
  '%ED%A0%80',
  '%F0%9F',
  'a%00',
  '..',
  '.',
  '%2e%2e',
  '%2E%2E%2F',
  '..%2F..%2Fetc%2Fpasswd',
  '%00',
  'a%00b',
  '%',
  '%ZZ',
  '%C0%AF',
  '%FF',
  '%E2%80%AE',
  ';',
  'a;b=c',
  '%20',
  '+',
  '~',
  '%2F',
  '%5C',
  '*',
  '%25',
  '@',
  'CON',
  'null',
  '0',
  '-1',
];

function pathParam(name: string): fc.Arbitrary<string> {
  const valid: Record<string, string[]> = {
    namespace: ['@@NS@@', '@@NS@@', '@@NS@@', '@@NS2@@', '@@NS_UPPER@@'],
    feed: ['@@FEED@@', '@@FEED@@', '@@FEED2@@', 'general', 'no-such-feed'],
    insight_id: ['@@INSIGHT@@', '@@INSIGHT@@', '01900000-0000-7000-8000-000000000000'],
    id: ['@@TOKENID@@', '@@TOKENID@@', '01900000-0000-7000-8000-000000000000'],
    username: ['@@MEMBER@@', '@@INVITEE@@', '@@OWNER@@', '@@STRANGER@@', '@@MEMBER_UPPER@@', 'nobody-here'],
  };
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...(valid[name] ?? ['x'])) },
    { weight: 1, arbitrary: fc.constantFrom(...PATH_BAD_VALUES) },
    { weight: 1, arbitrary: fc.integer({ min: 100, max: 6_000 }).map((n) => 'a'.repeat(n)) },
    { weight: 1, arbitrary: unicodeString.map(percentEncode) },
    {
      weight: 1,
      arbitrary: fc
        .string({ unit: asciiChar, minLength: 1, maxLength: 20 })
        .map((s) => s.replace(/[/?#%]/g, ''))
        .filter((s) => s.length > 0),
    },
    { weight: 1, arbitrary: fc.string({ unit: latin1Char, minLength: 1, maxLength: 20 }).map(percentEncode) },
    { weight: 1, arbitrary: fc.oneof(fc.uuid(), fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/)) },
  );
}

function buildPath(op: FuzzOperation): fc.Arbitrary<string> {
  const parts = op.path.split(/(\{[^}]+\})/).filter(Boolean);
  const pieces = parts.map((part) => {
    const param = /^\{([^}]+)\}$/.exec(part);
    return param
      ? pathParam(param[1]!)
      : fc.oneof({ weight: 20, arbitrary: fc.constant(part) }, { weight: 1, arbitrary: fc.constant(part.toUpperCase()) });
  });
  const joined = fc.tuple(...pieces).map((ps) => ps.join(''));
  return fc.oneof(
    { weight: 16, arbitrary: joined },
    { weight: 1, arbitrary: joined.map((p) => `${p}/`) },
    { weight: 1, arbitrary: joined.map((p) => p.replace(/\//g, '//')) },
    { weight: 1, arbitrary: joined.map((p) => `${p}/..`) },
    { weight: 1, arbitrary: joined.map((p) => `/v1/../${p.replace(/^\/v1\/?/, '')}`) },
    { weight: 1, arbitrary: joined.map((p) => p.replace(/\/([^/]*)$/, '/./$1')) },
    { weight: 1, arbitrary: fc.tuple(joined, pathParam('x')).map(([p, extra]) => `${p}/${extra}`) },
  );
}

function buildQuery(op: FuzzOperation): fc.Arbitrary<string> {
  const names = op.query.map((p) => p.name);
  const value = fc.oneof(
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        '1',
        '10',
        '50',
        '100',
        '0',
        '-1',
        '101',
        '1.5',
        '1e3',
        'abc',
        '',
        '%20',
        '+',
        'null',
        'true',
        '99999999999999999999',
        '@@FEED@@',
        'general',
        'key:value',
        'a:',
        ':b',
        ':',
        'k:v:w',
        '%00',
        '%ZZ',
        '[]',
        '{}',
      ),
    },
    // what no store can hold: the pipeline's screen (server/src/http/hostile-input.ts)
    { weight: 1, arbitrary: fc.constantFrom('1e309', '-1e309', 'a%00b', 'k:%00', '%ED%A0%80', 'k:%ED%A0%80', '2026-12-31T23%3A59%3A60Z') },
    { weight: 2, arbitrary: anyString.map((s) => percentEncode(s).slice(0, 4000)) },
    { weight: 1, arbitrary: fc.string({ unit: asciiChar, maxLength: 30 }).map((s) => s.replace(/#/g, '')) },
  );
  const name = fc.oneof(
    { weight: 4, arbitrary: names.length ? fc.constantFrom(...names) : fc.constant('limit') },
    { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'limit[]', 'limit[a]', 'cursor[]', 'feed', 'tag', 'x', '') },
  );
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant('') },
    {
      weight: 4,
      arbitrary: fc
        .array(fc.tuple(name, value), { minLength: 1, maxLength: 4 })
        .map((pairs) => `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`),
    },
    { weight: 1, arbitrary: fc.constantFrom('?', '?&&', '?=', '?limit', '?limit=1&limit=2', '?cursor=%ZZ', '?limit=%00', '?%') },
  );
}

const AUTH_BAD: [string, string][][] = [
  [],
  [['Authorization', '']],
  [['Authorization', 'Bearer']],
  [['Authorization', 'Bearer ']],
  [['Authorization', 'bearer @@S@@']],
  [['Authorization', 'TOKEN @@S@@']],
  [['Authorization', 'Bearer  @@S@@']],
  [['Authorization', 'Basic dXNlcjpwYXNz']],
  [['Authorization', 'Bearer @@S@@x']],
  [['Authorization', 'Bearer @@S@@ extra']],
  [['Authorization', 'Bearer @@S@@,Bearer @@S@@']],
  [['Authorization', '@@S@@']],
  [['Authorization', 'Bearer ses_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']],
  [['Authorization', 'Bearer api_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']],
  [
    ['Authorization', 'Bearer @@S@@'],
    ['Authorization', 'Bearer junk'],
  ],
  [
    ['Authorization', 'Bearer junk'],
    ['Authorization', 'Bearer @@S@@'],
  ],
  [
    ['Authorization', 'Bearer @@S@@'],
    ['Authorization', 'Bearer @@S@@'],
  ],
  [['authorization', 'Bearer @@A@@']],
  [['Authorization', 'Token @@A@@']],
];

function buildAuth(): fc.Arbitrary<[string, string][]> {
  return fc.oneof(
    // half the cases: a valid session token, so that handlers are reached
    { weight: 20, arbitrary: fc.constant<[string, string][]>([['Authorization', 'Bearer @@S@@']]) },
    { weight: 4, arbitrary: fc.constant<[string, string][]>([['Authorization', 'Bearer @@A@@']]) },
    { weight: 12, arbitrary: fc.constantFrom(...AUTH_BAD) },
    {
      weight: 4,
      arbitrary: fc
        .tuple(fc.constantFrom('Bearer ', 'Token ', '', 'Bearer\t', 'Negotiate '), headerJunk)
        .map(([scheme, junk]): [string, string][] => [['Authorization', scheme + junk]]),
    },
  );
}

const CONTENT_TYPES = [
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'APPLICATION/JSON',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json; charset=',
  'application/json;;;',
  'text/plain',
  'text/json',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=x',
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/vnd.api+json',
  '*/*',
  '',
  'json',
  'application/',
];

function buildContentType(): fc.Arbitrary<[string, string][]> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant<[string, string][]>([['Content-Type', 'application/json']]) },
    { weight: 4, arbitrary: fc.constantFrom(...CONTENT_TYPES).map((ct): [string, string][] => [['Content-Type', ct]]) },
    { weight: 1, arbitrary: fc.constant<[string, string][]>([]) },
    {
      weight: 1,
      arbitrary: fc.constant<[string, string][]>([
        ['Content-Type', 'application/json'],
        ['Content-Type', 'text/plain'],
      ]),
    },
    { weight: 1, arbitrary: headerJunk.map((junk): [string, string][] => [['Content-Type', junk]]) },
  );
}

function buildExtraHeaders(op: FuzzOperation): fc.Arbitrary<[string, string][]> {
  const declared = op.headers.map((h) => h.name);
  const header = fc.oneof(
    fc.constantFrom<[string, string]>(
      ['Content-Encoding', 'gzip'],
      ['Content-Encoding', 'deflate'],
      ['Content-Encoding', 'br'],
      ['Content-Encoding', 'compress'],
      ['Content-Encoding', 'identity'],
      ['Accept', 'text/html'],
      ['Accept', 'application/xml'],
      ['Accept-Charset', 'utf-16'],
      ['Origin', 'https://evil.example'],
      ['X-HTTP-Method-Override', 'DELETE'],
      ['X-Forwarded-For', '1.2.3.4, ::1, junk'],
      ['X-Request-Id', 'has spaces'],
      ['Last-Event-ID', '01900000-0000-7000-8000-000000000000'],
      ['Stripe-Signature', 't=1,v1=abc'],
      ['Range', 'bytes=0-1'],
      ['If-None-Match', '*'],
      ['Cookie', 'session=@@S@@'],
    ),
    fc
      .tuple(fc.constantFrom(...declared, 'X-Request-Id', 'Last-Event-ID', 'Stripe-Signature', 'User-Agent', 'X-Junk'), headerJunk)
      .map(([k, v]): [string, string] => [k, v]),
  );
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<[string, string][]>([]) },
    { weight: 1, arbitrary: fc.array(header, { minLength: 1, maxLength: 3 }) },
  );
}

/** Methods Node's parser knows (it answers an unknown method itself, with a bare 400). */
const OTHER_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'PURGE', 'MKCOL', 'COPY', 'REPORT'];

/** One generated request to an operation. */
export function requestFor(document: OpenAPIV3.Document, op: FuzzOperation): fc.Arbitrary<FuzzRequest> {
  const method = fc.oneof({ weight: 9, arbitrary: fc.constant(op.method) }, { weight: 1, arbitrary: fc.constantFrom(...OTHER_METHODS) });
  const specials = { ...SPECIAL_PROPERTIES, ...OPERATION_PROPERTIES[op.operationId] };
  const valid = op.bodySchema ? fromSchema(document, op.bodySchema, 0, undefined, specials) : fc.constant({});
  const body: fc.Arbitrary<{ body?: string; rawBytes?: boolean; chunked?: boolean }> = op.bodySchema
    ? fc.oneof(
        { weight: 4, arbitrary: valid.map((v) => ({ body: JSON.stringify(v) })) },
        { weight: 7, arbitrary: mutatedBody(valid).map((b) => ({ body: b })) },
        { weight: 1, arbitrary: invalidUtf8.map((b) => ({ body: b, rawBytes: true })) },
        { weight: 1, arbitrary: valid.map((v) => ({ body: JSON.stringify(v), chunked: true })) },
        { weight: 1, arbitrary: fc.constant({}) },
      )
    : fc.oneof(
        { weight: 8, arbitrary: fc.constant({}) },
        { weight: 1, arbitrary: anyJson.map((v) => ({ body: JSON.stringify(v) ?? 'null' })) },
      );
  return fc
    .record({
      method,
      path: buildPath(op),
      query: buildQuery(op),
      auth: buildAuth(),
      contentType: op.bodySchema
        ? buildContentType()
        : fc.oneof(fc.constant<[string, string][]>([]), fc.constant<[string, string][]>([['Content-Type', 'application/json']])),
      extra: buildExtraHeaders(op),
      body,
    })
    .map(({ method, path, query, auth, contentType, extra, body }) =>
      fitHeaderBlock({
        op: op.operationId,
        method,
        path: path + query,
        headers: [...auth, ...(body.body !== undefined ? contentType : []), ...extra],
        ...body,
      }),
    );
}

/**
 * Node's HTTP parser answers a request line and headers over 16 KiB itself (a bare 431, before the
 * service sees the request), so long paths and header values are cut to keep the block under that.
 */
const HEADER_BLOCK_BUDGET = 14_000;
function fitHeaderBlock(request: FuzzRequest): FuzzRequest {
  const size = () => request.path.length + request.headers.reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
  if (size() <= HEADER_BLOCK_BUDGET) return request;
  request = { ...request, path: request.path.slice(0, 7_000), headers: request.headers.map(([k, v]) => [k, v.slice(0, 2_000)]) };
  return request;
}

export function requestArbitrary(contract: ContractModel): fc.Arbitrary<FuzzRequest> {
  const document = contract.document;
  const ops = operationsOf(contract);
  // Every operation equally often; the public meta routes and the spec itself count once.
  return fc.oneof(...ops.map((op) => requestFor(document, op)));
}
