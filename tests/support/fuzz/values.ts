/**
 * Values for the fields of a generated request: values valid for a schema (fromSchema, fed the
 * fixture's placeholders where a property's name or the operation calls for them, so that handlers
 * are reached), and nasty ones (unicode, huge strings, odd numbers, `__proto__`). Mixed into bodies
 * (now and then as a date-time of fromSchema's, and in the mutations of bodies.ts): what no store
 * can hold whatever the field says (NUL, unpaired surrogates, numbers past what JavaScript holds,
 * impossible date-times), and input whose faults are many or deep (tens of thousands of bad values
 * or unknown fields, absurd nesting).
 */
import fc from 'fast-check';
import type { OpenAPIV3 } from 'openapi-types';

type Schema = OpenAPIV3.SchemaObject | OpenAPIV3.ReferenceObject;

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

export const unicodeString = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(...NASTY),
);
export const hugeString = fc
  .tuple(fc.integer({ min: 1_000, max: 100_000 }), fc.constantFrom('x', 'é', '🙂', '\u0000', 'a b', '"'))
  .map(([n, ch]) => ch.repeat(Math.ceil(n / ch.length)));
export const anyString = fc.oneof({ weight: 6, arbitrary: unicodeString }, { weight: 1, arbitrary: hugeString });

export const weirdNumber = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, -0, 1e308, -1e308, 2 ** 53 + 1, 1e-300, 4294967296, 2147483648, 0.5),
);
// ---------- What no store can hold, whatever the field (the pipeline's screen, server/src/http/hostile-input.ts) ----------

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
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
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
export const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
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
export const SPECIAL_PROPERTIES: Record<string, fc.Arbitrary<unknown>> = {
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

/** The project a LogSnag route's body names: the fixture's, mostly; another user's; none. */
function logSnagProject(): fc.Arbitrary<string> {
  return fc.constantFrom('@@NS@@', '@@NS@@', '@@NS@@', '@@NS2@@', '@@NS_UPPER@@', 'nowhere-here');
}

/** LogSnag's `icon`: an emoji, or a string of another size. */
function logSnagIcon(): fc.Arbitrary<string> {
  return fc.oneof(fc.constantFrom('🎉', '👨‍👩‍👧', ''), fc.string({ maxLength: 40 }));
}

/**
 * Per operation, values that reach further than generated ones. An e-mail change gets the owner's
 * password half the time, so that its handler is reached: its success only records a pending change
 * (the address changes when the mailed link is followed, which no case can guess), and a taken
 * address gets the same answer. A password change or an account's deletion gets no real password:
 * it would lock the fixture out.
 */
export const OPERATION_PROPERTIES: Record<string, Record<string, fc.Arbitrary<unknown>>> = {
  // LogSnag's routes name their project in the body, and their `icon` is an emoji, not an image.
  logsnagLog: { project: logSnagProject(), icon: logSnagIcon() },
  logsnagSetInsight: { project: logSnagProject(), icon: logSnagIcon() },
  logsnagIncrementInsight: { project: logSnagProject(), icon: logSnagIcon() },
  logsnagIdentify: { project: logSnagProject() },
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
