/**
 * Request bodies broken on purpose, from a valid one (fromSchema's, values.ts): a field missing,
 * extra, of the wrong type, huge or nasty, or one no store can hold; tens of thousands of fields the
 * contract does not define; the same key twice; absurd nesting; broken JSON; bytes that are not UTF-8.
 */
import fc from 'fast-check';
import { anyJson, hostileValue, hugeString, jsonText, weirdNumber } from './values.js';

type JsonObject = Record<string, unknown>;

/** A valid body, broken in one or two ways. */
export function mutatedBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
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
export const invalidUtf8 = fc.constantFrom(
  '{"name":"\xc3\x28"}',
  '{"name":"\xff\xfe"}',
  '\xc0\xaf',
  '{"event":"\xed\xa0\x80"}',
  '\xfe\xff\x00{\x00}',
);
