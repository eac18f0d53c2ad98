/**
 * The fuzzer shared by tests/contract/fuzz.test.ts (CI, 2,000+ cases) and scripts/fuzz.ts (`npm run fuzz`,
 * 10,000+): fast-check generates requests to every operation of spec/generated/openapi.json, most
 * of them broken on purpose (wrong types, missing and extra fields, huge and unicode strings, bad
 * path parameters, bad and duplicated headers, broken JSON, wrong methods), half of them with a
 * valid session token so that the handlers are reached and not only the credential check. Mixed
 * into the body, query and path mutations: what no store can hold whatever the field says (NUL,
 * unpaired surrogates, numbers past what JavaScript holds, impossible date-times), and input whose
 * faults are many or deep (tens of thousands of bad values or unknown fields, absurd nesting).
 *
 * Each case is sent over a fresh `node:http` connection (so duplicated headers, `..` and `%00` in
 * paths, and any method reach the server as written) and must get:
 *   - an answer below 500, within 10 s;
 *   - an answer the contract allows, as the conformance package's judge sees it
 *     (tools/src/conformance/contract.ts, through response-check.ts, which also keeps it for the
 *     end-of-run report): a documented status, the documented headers and content type, a body
 *     matching the documented schema (the envelope, with `code` from ErrorCode), no body where none
 *     is documented, 404 or 405 with `Allow` where no operation has the path or the method;
 *   - an error message that names no internals (a stack frame, an SQL statement);
 *   - when refused (4xx): no change in the database: the row count and an MD5 of the contents of
 *     every table are compared before and after the case (last-use times, which a valid credential
 *     refreshes by design, are left out).
 *
 * Requests hold placeholders (`@@S@@` for the session token, `@@NS@@` for the fixture project, …)
 * resolved at send time against the fixture, which is repaired after any case that succeeded in
 * changing something (a deleted project, a renamed feed, a logged-out session).
 */
import http from 'node:http';
import fc from 'fast-check';
import type { OpenAPIV3 } from 'openapi-types';
import type { Database } from '../../server/src/db/orm.js';
import { createInviteCode } from '../../server/src/domain/invite-codes.js';
import type { ContractModel } from '../../tools/src/conformance/contract.js';
import { png } from '../../tools/src/conformance/png.js';
import { callAt, type Answer } from './http.js';
import { contractModel, recordAnswer } from './response-check.js';

// ---------- The contract ----------

export interface FuzzOperation {
  operationId: string;
  method: string;
  path: string;
  operation: OpenAPIV3.OperationObject;
  bodySchema: OpenAPIV3.SchemaObject | OpenAPIV3.ReferenceObject | undefined;
  query: OpenAPIV3.ParameterObject[];
  headers: OpenAPIV3.ParameterObject[];
}

type Schema = OpenAPIV3.SchemaObject | OpenAPIV3.ReferenceObject;

/** The contract's operations with what the generator needs: the body schema and the query and header parameters. */
export function operationsOf(contract: ContractModel): FuzzOperation[] {
  const document = contract.document;
  const deref = <T>(value: T | OpenAPIV3.ReferenceObject): T => {
    if (value && typeof value === 'object' && '$ref' in value) {
      const parts = value.$ref
        .replace(/^#\//, '')
        .split('/')
        .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
      return parts.reduce<any>((node, key) => node[key], document) as T;
    }
    return value;
  };
  return contract.operations.map((op) => {
    const operation = (document.paths[op.path] as Record<string, OpenAPIV3.OperationObject>)[op.method.toLowerCase()]!;
    const parameters = (operation.parameters ?? []).map((p) => deref<OpenAPIV3.ParameterObject>(p));
    const body = operation.requestBody ? deref<OpenAPIV3.RequestBodyObject>(operation.requestBody) : undefined;
    return {
      operationId: op.operationId,
      method: op.method,
      path: op.path,
      operation,
      bodySchema: body?.content['application/json']?.schema,
      query: parameters.filter((p) => p.in === 'query'),
      headers: parameters.filter((p) => p.in === 'header'),
    };
  });
}

// ---------- Generated requests ----------

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

const NASTY = [
  '',
  ' ',
  '\t',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\uffff',
  '\ufeff',
  '🙂',
  '👩‍👩‍👧‍👦',
  'Ω≈ç√∫',
  '\u202egnp.exe',
  'ＡＢＣ',
  "'; drop table users; --",
  '" or 1=1 --',
  '<script>alert(1)</script>',
  '${7*7}',
  '{{7*7}}',
  '%s%s%n',
  '\r\n\r\n',
  '\\',
  '"',
  '../../etc/passwd',
  'null',
  'undefined',
  'NaN',
  '-0',
  '1e999',
  '0x10',
  '__proto__',
  'constructor',
  'ses_',
  'api_',
  'general',
  'owner',
];

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

const unicodeString = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(...NASTY),
);
const hugeString = fc
  .tuple(fc.integer({ min: 1_000, max: 100_000 }), fc.constantFrom('x', 'é', '🙂', '\u0000', 'a b', '"'))
  .map(([n, ch]) => ch.repeat(Math.ceil(n / ch.length)));
const anyString = fc.oneof({ weight: 6, arbitrary: unicodeString }, { weight: 1, arbitrary: hugeString });

const weirdNumber = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, -0, 1e308, -1e308, 2 ** 53 + 1, 1e-300, 4294967296, 2147483648, 0.5),
);
// ---------- What no store can hold, whatever the field (the pipeline's screen, server/src/http/contract.ts) ----------

/**
 * JSON text JSON.stringify cannot write (a number JavaScript cannot hold, nesting deeper than its
 * recursion allows) stands in a generated value as this marker string; `jsonText` writes it out.
 */
const rawJson = (text: string): string => `\u0001raw:${text}\u0001`;
const RAW_JSON_MARKER = /"\\u0001raw:([^"\\]*)\\u0001"/g;

/** JSON text for a generated value, with `rawJson` markers written as the text they stand for. */
export function jsonText(value: unknown): string {
  return (JSON.stringify(value) ?? 'null').replace(RAW_JSON_MARKER, '$1');
}

/** Numbers JSON can spell but JavaScript cannot hold: JSON.parse makes them ±Infinity. */
const unholdableNumber = fc.constantFrom('1e309', '-1e309', '1e400', '2e308', '-123456789e999', '1' + '0'.repeat(400)).map(rawJson);

/** Date-times no store holds (leap second, year 0000, days a month lacks, past year 9999), or that name no instant. */
const impossibleTimestamp = fc.constantFrom(
  '2026-12-31T23:59:60Z',
  '2016-12-31T23:59:60Z',
  '0000-01-01T00:00:00Z',
  '0000-12-31T23:00:00-02:00',
  '2026-02-30T12:00:00Z',
  '2026-02-29T00:00:00Z',
  '9999-12-31T23:59:59-23:59',
  '2026-13-01T00:00:00Z',
  '2026-01-01T24:00:00Z',
  '+275760-09-13T00:00:00.001Z',
  '-000001-01-01T00:00:00Z',
  '2026-01-01T00:00:00.1234567890123Z',
  '2026-01-01T00:00:00+24:00',
  '2026-01-01T00:00:00+05',
);

/** Strings no store holds: NUL, and UTF-16 surrogates without their pair, alone or inside ordinary text. */
const unstorableString = fc.oneof(
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\udc00\ud800', '🙂'.slice(0, 1), '🙂'.slice(1)),
  fc
    .tuple(fc.string({ maxLength: 20 }), fc.constantFrom('\u0000', '\ud83d', '\ude42'), fc.string({ maxLength: 20 }))
    .map(([before, bad, after]) => before + bad + after),
);

const hostileScalar = fc.oneof(unstorableString, unholdableNumber, impossibleTimestamp);

/** One value no store holds, or one with a great many faults: thousands of bad values or fields, absurd nesting. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: hostileScalar },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1_000, max: 60_000 }), fc.oneof(hostileScalar, fc.constantFrom(null, {}, [])))
      .map(([n, value]) => new Array<unknown>(n).fill(value)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1_000, max: 60_000 }), fc.oneof(hostileScalar, fc.constant(null)))
      .map(([n, value]) => Object.fromEntries(Array.from({ length: n }, (_, i) => [i.toString(36), value]))),
  },
  { weight: 1, arbitrary: fc.integer({ min: 30, max: 5_000 }).map((depth) => rawJson('['.repeat(depth) + ']'.repeat(depth))) },
);

/** Any JSON value, small, with nasty strings and numbers in it. */
const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    weirdNumber,
    anyString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('__proto__', 'constructor', 'prototype')), tie('value'), {
      maxKeys: 4,
    }),
  ),
})).value;

function resolveRef(document: OpenAPIV3.Document, schema: Schema): OpenAPIV3.SchemaObject {
  let current: Schema = schema;
  for (let i = 0; i < 20 && '$ref' in current; i++) {
    const parts = current.$ref.replace(/^#\//, '').split('/');
    current = parts.reduce<any>((node, key) => node[key], document);
  }
  return current as OpenAPIV3.SchemaObject;
}

/** The value a property of this name is best fed with, when the fixture has one. */
const SPECIAL_PROPERTIES: Record<string, fc.Arbitrary<unknown>> = {
  invite: fc.oneof(
    { weight: 1, arbitrary: fc.constant('@@INVITE@@') },
    { weight: 3, arbitrary: fc.string({ minLength: 1, maxLength: 40 }) },
  ),
  icon: fc.constantFrom(
    '@@PNG@@',
    'data:image/png;base64,@@PNG@@',
    'data:image/png;base64,iVBORw0KGgo=',
    'data:image/png;base64,!!!!',
    'aGVsbG8=',
  ),
  username: fc.constantFrom('@@MEMBER@@', '@@INVITEE@@', '@@OWNER@@', '@@STRANGER@@', '@@MEMBER_UPPER@@', 'nobody-here'),
  login: fc.constantFrom('@@OWNER@@', '@@OWNER@@@example.com', 'nobody', 'x'),
};

/**
 * Per operation, values that reach further than generated ones. An e-mail change gets the owner's
 * password half the time, so that its handler is reached: its success only records a pending change
 * (the address changes when the mailed link is followed, which no case can guess), and a taken
 * address gets the same answer. A password change or an account's deletion gets no real password:
 * it would lock the fixture out.
 */
const OPERATION_PROPERTIES: Record<string, Record<string, fc.Arbitrary<unknown>>> = {
  changeEmail: {
    current_password: fc.oneof(fc.constant('@@PASSWORD@@'), fc.string({ minLength: 1, maxLength: 40 })),
    email: fc.oneof(
      { weight: 3, arbitrary: fc.emailAddress().filter((s) => s.length <= 254) },
      { weight: 1, arbitrary: fc.constantFrom('@@MEMBER@@@example.com', '@@OWNER@@@example.com', '@@MEMBER_UPPER@@@EXAMPLE.COM') },
    ),
  },
};

/** Values valid for a schema (most of the time: patterns and formats are generated, not checked). */
export function fromSchema(
  document: OpenAPIV3.Document,
  input: Schema,
  depth = 0,
  name?: string,
  specials: Record<string, fc.Arbitrary<unknown>> = SPECIAL_PROPERTIES,
): fc.Arbitrary<unknown> {
  if (name && specials[name]) return specials[name];
  let schema = resolveRef(document, input);
  if (schema.allOf) {
    // The parts' constraints, with the outer schema's own keywords (nullable, description) on top.
    const { allOf, ...outer } = schema;
    schema = Object.assign({}, ...allOf.map((part) => resolveRef(document, part)), outer) as OpenAPIV3.SchemaObject;
  }
  let base: fc.Arbitrary<unknown>;
  if (schema.anyOf || schema.oneOf) {
    base = fc.oneof(...(schema.anyOf ?? schema.oneOf)!.map((s) => fromSchema(document, s, depth + 1, undefined, specials)));
  } else if (schema.enum) {
    base = fc.constantFrom(...schema.enum);
  } else {
    switch (schema.type) {
      case 'string': {
        const min = schema.minLength ?? 0;
        const max = Math.min(schema.maxLength ?? 60, 60);
        const fits = (s: string) => s.length >= min && s.length <= (schema.maxLength ?? Infinity);
        if (schema.format === 'email') base = fc.emailAddress().filter((s) => s.length <= (schema.maxLength ?? 254));
        else if (schema.format === 'uuid') base = fc.uuid();
        else if (schema.format === 'date-time') {
          const real = fc
            .date({ min: new Date('1990-01-01'), max: new Date('2090-01-01'), noInvalidDate: true })
            .map((d) => d.toISOString());
          base = fc.oneof({ weight: 9, arbitrary: real }, { weight: 1, arbitrary: impossibleTimestamp });
        } else if (schema.pattern) base = fc.stringMatching(new RegExp(schema.pattern)).filter(fits);
        else base = fc.string({ unit: 'grapheme', minLength: min, maxLength: Math.max(min, max) }).filter(fits);
        break;
      }
      case 'integer':
        base = fc.integer({ min: schema.minimum ?? -1_000_000, max: schema.maximum ?? 1_000_000 });
        break;
      case 'number':
        base = fc.double({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9, noNaN: true, noDefaultInfinity: true });
        break;
      case 'boolean':
        base = fc.boolean();
        break;
      case 'array':
        base = depth > 4 ? fc.constant([]) : fc.array(fromSchema(document, schema.items, depth + 1, undefined, specials), { maxLength: 3 });
        break;
      case 'object':
      default: {
        const properties = schema.properties ?? {};
        const required = new Set(schema.required ?? []);
        const record = fc.record(
          Object.fromEntries(
            Object.entries(properties).map(([key, value]) => [key, fromSchema(document, value, depth + 1, key, specials)]),
          ),
          { requiredKeys: [...required].filter((key) => key in properties) },
        );
        const extra = schema.additionalProperties;
        if (extra && typeof extra === 'object') {
          const values = Object.keys(extra).length === 0 ? anyJson : fromSchema(document, extra, depth + 1, undefined, specials);
          base = fc
            .tuple(record, fc.dictionary(fc.stringMatching(/^[a-z0-9-]{1,32}$/), values, { maxKeys: 5 }))
            .map(([r, d]) => ({ ...d, ...r }));
        } else {
          base = record;
        }
      }
    }
  }
  return schema.nullable ? fc.option(base, { nil: null, freq: 4 }) : base;
}

type JsonObject = Record<string, unknown>;

/** A valid body, broken in one or two ways. */
function mutatedBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  const wrongValue = fc.oneof(anyJson, hugeString, fc.constant(null), weirdNumber, fc.boolean(), fc.constant([]), fc.constant({}));
  const objectMutation = fc.oneof(
    // a required or optional field missing
    fc.tuple(valid, fc.nat()).map(([body, i]) => {
      if (!body || typeof body !== 'object' || Array.isArray(body)) return body;
      const keys = Object.keys(body);
      const copy = { ...(body as JsonObject) };
      if (keys.length > 0) delete copy[keys[i % keys.length]!];
      return copy;
    }),
    // an extra field
    fc
      .tuple(
        valid,
        fc.oneof(
          fc.string({ maxLength: 20 }),
          fc.constantFrom('__proto__', 'constructor', 'id', 'tier', 'billing_id', 'role', 'owner', 'user_id'),
        ),
        anyJson,
      )
      .map(([body, key, value]) => {
        if (!body || typeof body !== 'object' || Array.isArray(body)) return body;
        // Put together as JSON text, so that a key such as `__proto__` is a field like any other.
        const fields = JSON.stringify(body).slice(1, -1);
        return JSON.parse(`{${fields}${fields ? ',' : ''}${JSON.stringify(key)}:${JSON.stringify(value) ?? 'null'}}`);
      }),
    // a field of the wrong type, or huge, or nasty
    fc.tuple(valid, fc.nat(), wrongValue).map(([body, i, value]) => {
      if (!body || typeof body !== 'object' || Array.isArray(body)) return value;
      const keys = Object.keys(body);
      if (keys.length === 0) return { x: value };
      return { ...(body as JsonObject), [keys[i % keys.length]!]: value };
    }),
    // not an object at all
    wrongValue,
    // a field no store can hold, or with a great many faults
    fc.tuple(valid, fc.nat(), hostileValue).map(([body, i, value]) => {
      if (!body || typeof body !== 'object' || Array.isArray(body)) return value;
      const keys = Object.keys(body);
      return { ...(body as JsonObject), [keys.length ? keys[i % keys.length]! : 'x']: value };
    }),
    // a great many fields the contract does not define
    fc.tuple(valid, fc.integer({ min: 100, max: 60_000 })).map(([body, n]) => ({
      ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`u${i.toString(36)}`, 1])),
      ...(body && typeof body === 'object' && !Array.isArray(body) ? body : {}),
    })),
  );
  const text = objectMutation.map(jsonText);
  return fc.oneof(
    { weight: 6, arbitrary: text },
    // the same key twice, the second of another type
    {
      weight: 1,
      arbitrary: fc.tuple(valid, anyJson).map(([body, value]) => {
        const json = JSON.stringify(body) ?? 'null';
        const key = body && typeof body === 'object' ? Object.keys(body)[0] : undefined;
        return key === undefined ? json : `${json.slice(0, -1)},${JSON.stringify(key)}:${JSON.stringify(value) ?? 'null'}}`;
      }),
    },
    // deep nesting
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 100, max: 20_000 })
        .chain((n) =>
          fc.constantFrom(
            '['.repeat(n) + ']'.repeat(n),
            '{"a":'.repeat(n) + '1' + '}'.repeat(n),
            `{"name":${'['.repeat(n)}${']'.repeat(n)}}`,
          ),
        ),
    },
    // broken JSON
    { weight: 2, arbitrary: brokenJson(valid) },
  );
}

function brokenJson(valid: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  const json = valid.map((v) => JSON.stringify(v) ?? 'null');
  return fc.oneof(
    fc.tuple(json, fc.nat()).map(([s, n]) => s.slice(0, n % Math.max(1, s.length))),
    json.map((s) => s.replace(/}$/, ',}')),
    json.map((s) => s.replace(/"/g, "'")),
    json.map((s) => `\ufeff${s}`),
    json.map((s) => `${s}${s}`),
    json.map((s) => `${s} trailing`),
    json.map((s) => `/* c */${s}`),
    fc.constantFrom(
      '',
      ' ',
      'null',
      'true',
      '"str"',
      '0',
      'NaN',
      'Infinity',
      '{',
      '}',
      '[',
      '{"a":01}',
      '{"a":1,,}',
      "{'a':1}",
      '{"a":"\\x41"}',
      '{"a":"\\ud800"}',
      '{"a":"\\u0000"}',
      '{a:1}',
      '\u0000',
      '{"a":1}\u0000',
      '{"__proto__":{"admin":true}}',
    ),
    fc.string({ unit: 'binary', maxLength: 200 }),
  );
}

/** Bytes that are not UTF-8 (sent as Latin-1 characters, one byte each). */
const invalidUtf8 = fc.constantFrom(
  '{"name":"\xc3\x28"}',
  '{"name":"\xff\xfe"}',
  '\xc0\xaf',
  '{"event":"\xed\xa0\x80"}',
  '\xfe\xff\x00{\x00}',
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
    // what no store can hold: the pipeline's screen (server/src/http/contract.ts)
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

// ---------- The fixture: real objects for the placeholders ----------

export interface FuzzTarget {
  url: string;
  db: Database;
}

interface Account {
  username: string;
  password: string;
  token: string;
}

export class Fixture {
  owner!: Account;
  member!: Account;
  invitee!: Account;
  stranger!: Account;
  apiToken = '';
  apiTokenId = '';
  namespace = '';
  namespace2 = '';
  feed = 'general';
  feed2 = 'second';
  insight = '';
  private invites: string[] = [];
  private readonly tag = Math.random().toString(36).slice(2, 8);
  readonly pngBase64 = png(2, 2).toString('base64');

  constructor(
    private readonly target: FuzzTarget,
    private readonly onSecret: (value: string) => void = () => {},
  ) {}

  private call(method: string, path: string, token?: string, body?: unknown): Promise<Answer> {
    return callAt(this.target.url, method, path, token, body);
  }

  private async must(method: string, path: string, token?: string, body?: unknown): Promise<any> {
    const answer = await this.call(method, path, token, body);
    if (answer.status >= 300) throw new Error(`fuzz fixture: ${method} ${path} answered ${answer.status} ${JSON.stringify(answer.json)}`);
    return answer.json?.data;
  }

  async inviteCode(): Promise<string> {
    const { code } = await createInviteCode(this.target.db.orm.em.fork(), {});
    this.onSecret(code);
    return code;
  }

  private async account(role: string): Promise<Account> {
    const username = `fz-${role}-${this.tag}`;
    const password = `pw-${Math.random().toString(36).slice(2)}-${this.tag}`;
    this.onSecret(password);
    const data = await this.must('POST', '/v1/auth/signup', undefined, {
      username,
      email: `${username}@example.com`,
      password,
      invite: await this.inviteCode(),
    });
    this.onSecret(data.token);
    return { username, password, token: data.token };
  }

  async setUp(): Promise<void> {
    this.owner = await this.account('owner');
    this.member = await this.account('member');
    this.invitee = await this.account('invitee');
    this.stranger = await this.account('stranger');
    this.namespace2 = `fz-other-${this.tag}`;
    await this.must('POST', '/v1/projects', this.stranger.token, { namespace: this.namespace2, name: 'Not yours' });
    for (let i = 0; i < 30; i++) this.invites.push(await this.inviteCode());
    await this.repair();
  }

  /** Takes an invite code from the pool (sign-ups that succeed use them up). */
  nextInvite(): string {
    return this.invites.pop() ?? 'no-invite-left';
  }

  /** Brings every placeholder back to a live object after a case that changed something. */
  async repair(): Promise<void> {
    if ((await this.call('GET', '/v1/users/me', this.owner.token)).status === 401) {
      const data = await this.must('POST', '/v1/auth/login', undefined, { login: this.owner.username, password: this.owner.password });
      this.onSecret(data.token);
      this.owner.token = data.token;
    }
    const token = this.owner.token;
    // A PATCH /v1/users/me that went through renamed the owner: rename it back, since the
    // placeholders and the next login name the owner by its username. Its address changes only
    // when an e-mail change's mailed link is followed, which no case can guess: a request that
    // went through (PATCH takes no `email`; PUT /v1/users/me/email only asks) left it as it was.
    const me = await this.must('GET', '/v1/users/me', token);
    const email = `${this.owner.username}@example.com`;
    if (me.email !== email) throw new Error(`the owner's address changed without a confirmed link: ${String(me.email)}`);
    if (me.username !== this.owner.username) await this.must('PATCH', '/v1/users/me', token, { username: this.owner.username });
    if (!this.apiToken || (await this.call('GET', '/v1/users/me', this.apiToken)).status === 401) {
      const data = await this.must('POST', '/v1/auth/tokens', token, { name: 'fuzz' });
      this.onSecret(data.token);
      this.apiToken = data.token;
      this.apiTokenId = data.id;
    }
    let project = this.namespace ? await this.call('GET', `/v1/projects/${this.namespace}`, token) : { status: 404, json: undefined };
    if (project.status !== 200) {
      const mine = await this.must('GET', '/v1/projects?limit=100', token);
      const owned = (mine.items as { namespace: string; members: { username: string; role: string }[] }[]).find((p) =>
        p.members.some((m) => m.username === this.owner.username && m.role === 'owner'),
      );
      this.namespace = owned?.namespace ?? `fz-${this.tag}-${Date.now().toString(36)}`;
      if (!owned) await this.must('POST', '/v1/projects', token, { namespace: this.namespace, name: 'Fuzz' });
      project = await this.call('GET', `/v1/projects/${this.namespace}`, token);
    }
    const ns = this.namespace;
    const feeds = (await this.must('GET', `/v1/projects/${ns}/feeds?limit=100`, token)).items as { name: string }[];
    while (feeds.length < 2) {
      const name = `f-${feeds.length}-${Date.now().toString(36)}`;
      await this.must('POST', `/v1/projects/${ns}/feeds`, token, { name });
      feeds.push({ name });
    }
    [this.feed, this.feed2] = [feeds[0]!.name, feeds[1]!.name];
    const insights = (await this.must('GET', `/v1/projects/${ns}/insights?limit=1`, token)).items as { id: string }[];
    this.insight = insights[0]?.id ?? (await this.must('POST', `/v1/projects/${ns}/insights`, token, { title: 'signups', value: 1 })).id;
    const members = (project.json?.data?.members ?? []) as { username: string }[];
    if (!members.some((m) => m.username === this.member.username)) {
      await this.call('POST', `/v1/projects/${ns}/invites`, token, { username: this.member.username });
      await this.call('PUT', `/v1/projects/${ns}/invites/${this.member.username}`, this.member.token);
    }
    const pending = (await this.must('GET', `/v1/projects/${ns}/invites?limit=100`, token)).items as {
      user?: { username: string };
      username?: string;
    }[];
    const invited = pending.some((i) => (i.user?.username ?? i.username) === this.invitee.username);
    if (!invited && !members.some((m) => m.username === this.invitee.username)) {
      await this.call('POST', `/v1/projects/${ns}/invites`, token, { username: this.invitee.username });
    }
  }

  /** Placeholders → live values. */
  resolve(text: string): string {
    if (!text.includes('@@')) return text;
    return text.replace(/@@([A-Z0-9_]+)@@/g, (whole, name: string) => {
      switch (name) {
        case 'S':
          return this.owner.token;
        case 'A':
          return this.apiToken;
        case 'NS':
          return this.namespace;
        case 'NS_UPPER':
          return this.namespace.toUpperCase();
        case 'NS2':
          return this.namespace2;
        case 'FEED':
          return this.feed;
        case 'FEED2':
          return this.feed2;
        case 'INSIGHT':
          return this.insight;
        case 'TOKENID':
          return this.apiTokenId;
        case 'OWNER':
          return this.owner.username;
        case 'PASSWORD':
          return this.owner.password;
        case 'MEMBER':
          return this.member.username;
        case 'MEMBER_UPPER':
          return this.member.username.toUpperCase();
        case 'INVITEE':
          return this.invitee.username;
        case 'STRANGER':
          return this.stranger.username;
        case 'INVITE':
          return this.nextInvite();
        case 'PNG':
          return this.pngBase64;
        default:
          return whole;
      }
    });
  }
}

// ---------- The database snapshot ----------

/** Columns a valid credential refreshes on use by design (at most once a minute): not a change. */
const VOLATILE_COLUMNS = new Set(['sessions.last_used_at', 'sessions.expires_at', 'api_tokens.last_used_at']);
/** Rate-limit counters count refused requests by design. */
const SKIPPED_TABLES = new Set(['rate_limits']);
/**
 * The rows of a table that are compared, where a refusal leaves others by design: the answer a
 * refused write recorded under its `Idempotency-Key`, which a retry gets again. A claim left
 * behind, or a success, would still show.
 */
const COMPARED_ROWS: Record<string, string> = { idempotency_keys: 'status is null or status < 400' };

export class Snapshotter {
  private query = '';
  constructor(private readonly db: Database) {}

  private async execute<T>(sql: string): Promise<T[]> {
    return this.db.orm.em.fork().getConnection().execute<T[]>(sql);
  }

  private async build(): Promise<void> {
    const columns = await this.execute<{ table_name: string; column_name: string }>(
      `select c.table_name, c.column_name from information_schema.columns c join information_schema.tables t
         on t.table_schema = c.table_schema and t.table_name = c.table_name
       where c.table_schema = 'public' and t.table_type = 'BASE TABLE' order by c.table_name, c.ordinal_position`,
    );
    const byTable = new Map<string, string[]>();
    for (const { table_name: table, column_name: column } of columns) {
      if (SKIPPED_TABLES.has(table) || VOLATILE_COLUMNS.has(`${table}.${column}`)) continue;
      byTable.set(table, [...(byTable.get(table) ?? []), `"${column}"`]);
    }
    this.query = [...byTable.entries()]
      .map(
        ([table, cols]) =>
          `select '${table}' as t, count(*)::int as n, coalesce(md5(string_agg(x::text, E'\\n' order by x::text)), '') as h from (select ` +
          `${cols.join(', ')} from "${table}"${COMPARED_ROWS[table] ? ` where ${COMPARED_ROWS[table]}` : ''}) x`,
      )
      .join(' union all ');
  }

  /** table → "rows:md5". */
  async take(): Promise<Map<string, string>> {
    if (!this.query) await this.build();
    const rows = await this.execute<{ t: string; n: number; h: string }>(this.query);
    return new Map(rows.map((r) => [r.t, `${r.n}:${r.h}`]));
  }

  static diff(before: Map<string, string>, after: Map<string, string>): string[] {
    const changed: string[] = [];
    for (const [table, state] of after) {
      const was = before.get(table);
      if (was !== state)
        changed.push(
          `${table} (rows ${was?.split(':')[0] ?? '?'} → ` +
            `${state.split(':')[0]}${was?.split(':')[0] === state.split(':')[0] ? ', contents changed' : ''})`,
        );
    }
    return changed;
  }
}

// ---------- Sending and judging one case ----------

export interface FuzzAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string | undefined;
  ms: number;
  stream: boolean;
}

const ANSWER_TIMEOUT_MS = 10_000;
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export function send(baseUrl: string, request: FuzzRequest, resolve: (s: string) => string): Promise<FuzzAnswer> {
  const url = new URL(baseUrl);
  // With headers given as a list Node adds no Host, and an HTTP/1.1 request without one is
  // refused by Node's own parser (a bare 400) before the service sees it.
  const headers: string[] = ['Host', url.host];
  for (const [name, value] of request.headers) headers.push(name, resolve(value));
  const body = request.body === undefined ? undefined : Buffer.from(resolve(request.body), request.rawBytes ? 'latin1' : 'utf8');
  // Framing is always explicit: Node adds no chunked encoding by itself to GET, HEAD or DELETE.
  if (body) headers.push(...(request.chunked ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(body.length)]));
  const started = performance.now();
  return new Promise((done, fail) => {
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: request.method,
      path: resolve(request.path),
      headers,
      agent: false,
      setHost: false,
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`));
    }, ANSWER_TIMEOUT_MS);
    req.on('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    req.on('response', (res) => {
      const stream = /^text\/event-stream/i.test(res.headers['content-type'] ?? '');
      if (stream || request.method === 'HEAD') {
        clearTimeout(timer);
        res.destroy();
        req.destroy();
        done({ status: res.statusCode!, headers: res.headers, body: undefined, ms: performance.now() - started, stream });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      });
      res.on('end', () => {
        clearTimeout(timer);
        done({
          status: res.statusCode!,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          ms: performance.now() - started,
          stream,
        });
      });
      res.on('error', (error) => {
        clearTimeout(timer);
        fail(error);
      });
    });
    if (body) {
      if (request.chunked) {
        const middle = Math.floor(body.length / 2);
        req.write(body.subarray(0, middle));
        req.end(body.subarray(middle));
      } else req.end(body);
    } else req.end();
  });
}

/** An error message is for the caller: a stack frame or an SQL statement in it leaks the service's internals. */
export function leakedInternals(answer: FuzzAnswer): string[] {
  let message: unknown;
  try {
    message = (JSON.parse(answer.body ?? '') as { error?: { message?: unknown } } | null)?.error?.message;
  } catch {
    return [];
  }
  return typeof message === 'string' && /\bat .+:\d+:\d+\)|\bselect\b.+\bfrom\b|\binsert into\b|stack/i.test(message)
    ? [`error.message leaks internals: ${message}`]
    : [];
}

// ---------- The run ----------

export interface FuzzReport {
  seed: number;
  /** Cases fast-check ran (the generation phase). */
  runs: number;
  /** Requests sent, shrinking included. */
  requests: number;
  statuses: Record<string, number>;
  fiveXX: number;
  /** Answers the contract's judge found fault with. */
  nonConforming: number;
  /** Requests the server dropped or left unanswered for 10 s. */
  noAnswer: number;
  dbChanges: number;
  perOperation: Record<string, number>;
  slowest: { ms: number; request: string; status: number } | undefined;
  failure: string | undefined;
  ms: number;
}

export interface FuzzOptions {
  numRuns: number;
  seed?: number;
  /** Stop generating (and shrinking) after this long; what ran is reported. */
  timeLimitMs?: number;
  onSecret?: (value: string) => void;
  log?: (line: string) => void;
  /** Log every case and its answer. */
  verbose?: boolean;
}

function describe(request: FuzzRequest, resolve: (s: string) => string): string {
  const path = resolve(request.path);
  const body = request.body === undefined ? '' : ` body(${request.body.length} chars)=${JSON.stringify(request.body.slice(0, 160))}`;
  const headers = request.headers.map(([k, v]) => `${k}: ${v.length > 80 ? `${v.slice(0, 80)}…(${v.length})` : v}`).join(' | ');
  return (
    `${request.op}: ${request.method} ${path.length > 200 ? `${path.slice(0, 200)}…(${path.length})` : path} ` +
    `[${headers}]${body}${request.chunked ? ' chunked' : ''}`
  );
}

/** Header look-up over node:http's header object, as the contract's judge reads headers. */
function headersOf(answer: FuzzAnswer): { get(name: string): string | null } {
  return {
    get: (name) => {
      const value = answer.headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

export async function runFuzz(target: FuzzTarget, options: FuzzOptions): Promise<FuzzReport> {
  const log = options.log ?? (() => {});
  const fixture = new Fixture(target, options.onSecret);
  await fixture.setUp();
  const snapshots = new Snapshotter(target.db);
  let snapshot = await snapshots.take();
  const seed = options.seed ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  const report: FuzzReport = {
    seed,
    runs: 0,
    requests: 0,
    statuses: {},
    fiveXX: 0,
    nonConforming: 0,
    noAnswer: 0,
    dbChanges: 0,
    perOperation: {},
    slowest: undefined,
    failure: undefined,
    ms: 0,
  };
  const started = performance.now();
  const resolve = (s: string) => fixture.resolve(s);

  const property = fc.asyncProperty(requestArbitrary(contractModel()), async (request) => {
    report.requests += 1;
    if (report.requests % 500 === 0) log(`  … ${report.requests} requests, ${Math.round((performance.now() - started) / 1000)} s`);
    report.perOperation[request.op] = (report.perOperation[request.op] ?? 0) + 1;
    // Placeholders are resolved once, so the case that is judged is the case that was sent.
    const sent: FuzzRequest = {
      ...request,
      path: resolve(request.path),
      headers: request.headers.map(([k, v]) => [k, resolve(v)]),
      ...(request.body !== undefined ? { body: resolve(request.body) } : {}),
    };
    let answer: FuzzAnswer;
    try {
      answer = await send(target.url, sent, (s) => s);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      // Node's client refusing what the generator made is a bug of the generator, not of the service.
      if (/^ERR_(UNESCAPED_CHARACTERS|INVALID_CHAR|INVALID_HTTP_TOKEN|HTTP_INVALID_HEADER_VALUE|INVALID_ARG)/.test(code))
        throw new Error(`the fuzzer generated a request Node cannot send (${code}): ${(error as Error).message}`, { cause: error });
      report.noAnswer += 1;
      throw new Error(`no answer: ${(error as Error).message} (${code})`, { cause: error });
    }
    report.statuses[answer.status] = (report.statuses[answer.status] ?? 0) + 1;
    if (options.verbose)
      log(
        `${answer.status} ${Math.round(answer.ms)} ms ${describe(request, (s) => s)} → ` +
          (answer.body ? answer.body.slice(0, 160) : `${JSON.stringify(sent).slice(0, 300)} ${JSON.stringify(answer.headers)}`),
      );
    if (!report.slowest || answer.ms > report.slowest.ms)
      report.slowest = { ms: answer.ms, request: describe(request, (s) => s), status: answer.status };
    const problems = answer.status >= 500 ? [`status ${answer.status} (5xx)`] : [];
    if (answer.status >= 500) report.fiveXX += 1;
    const violations = recordAnswer({
      method: sent.method,
      url: sent.path,
      status: answer.status,
      headers: headersOf(answer),
      body: answer.body,
      note: describe(request, (s) => s),
    });
    if (violations.length) report.nonConforming += 1;
    problems.push(...violations, ...leakedInternals(answer));

    if (answer.status >= 400) {
      const after = await snapshots.take();
      const changed = Snapshotter.diff(snapshot, after);
      snapshot = after;
      if (changed.length) {
        report.dbChanges += 1;
        problems.push(`refused with ${answer.status} but changed the database: ${changed.join(', ')}`);
      }
    } else {
      if (sent.method !== 'GET' && sent.method !== 'HEAD') await fixture.repair();
      snapshot = await snapshots.take();
    }
    if (problems.length) {
      throw new Error(
        `${problems.join('; ')}\n    answer ${answer.status} in ${Math.round(answer.ms)} ms: ${(answer.body ?? '').slice(0, 300)}`,
      );
    }
  });

  const details = await fc.check(property, {
    numRuns: options.numRuns,
    seed,
    ...(options.timeLimitMs ? { interruptAfterTimeLimit: options.timeLimitMs, markInterruptAsFailure: false } : {}),
  });
  report.runs = details.numRuns;
  report.ms = performance.now() - started;
  if (details.failed) {
    report.failure = fc.defaultReportMessage(details) ?? 'failed';
    if (details.counterexample)
      report.failure += `\nShrunk counterexample, with placeholders resolved:\n  ${describe(details.counterexample[0], resolve)}`;
  }
  return report;
}

export function formatReport(report: FuzzReport): string {
  const statuses = Object.entries(report.statuses)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
  return [
    `fuzz: ${report.runs} cases (${report.requests} requests with shrinking) in ${(report.ms / 1000).toFixed(1)} s, seed ${report.seed}`,
    `  statuses: ${statuses}`,
    `  5xx: ${report.fiveXX}; answers not as the contract says: ${report.nonConforming}; dropped or unanswered: ${report.noAnswer}; ` +
      `refused requests that changed the database: ${report.dbChanges}`,
    `  operations covered: ${Object.keys(report.perOperation).length}`,
    `  slowest: ${report.slowest ? `${report.slowest.ms.toFixed(0)} ms, ${report.slowest.status}, ${report.slowest.request}` : 'none'}`,
    `  failure: ${report.failure ?? 'none'}`,
  ].join('\n');
}
