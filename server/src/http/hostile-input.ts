/**
 * What no request may hold, whatever the contract says of a field: the values no store can keep as
 * they were sent, and the shapes that would make checking the request cost more than it is worth.
 * The contract cannot say these once for every field (a JSON Schema of every string would need the
 * rule repeated), and a request built to break a parser, a database or a validator is answered 400
 * here, before ajv sees it:
 *
 * - strings (values and field names alike) with NUL, which PostgreSQL's text and jsonb refuse, or
 *   with a UTF-16 surrogate missing its pair, which is not Unicode and would be stored as something
 *   else than was sent;
 * - numbers JSON can spell but JavaScript cannot hold (`1e309` parses to Infinity);
 * - nesting deeper than MAX_DEPTH: the contract's bodies nest a few levels, a deeper one is hostile;
 * - date-times no store can give back (`isStorableDateTime`, which ajv applies to the contract's
 *   `date-time` fields: validation.ts).
 *
 * Everything here is pure: it reads the request's parts and answers problems, and the unit tests
 * (tests/unit/hostile-input.test.ts) call it directly.
 */
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { ErrorDetail } from '../errors.js';
import { MAX_DETAILS, escapeKey, pointer } from './validation-errors.js';

/** The contract's bodies nest a few levels deep; a request nesting past this is hostile, not detailed. */
export const MAX_DEPTH = 32;

/** `String.prototype.isWellFormed` (Node 20; not yet in TypeScript's ES2022 library): false when a surrogate lacks its pair. */
const isWellFormed = (String.prototype as unknown as { isWellFormed(this: string): boolean }).isWellFormed;

/** Why no store can hold a string, if none can: NUL, or a UTF-16 surrogate without its pair. */
export function unstorable(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain NUL characters';
  if (!isWellFormed.call(value)) return 'must not contain unpaired surrogates';
  return undefined;
}

const rfc3339 = fullFormats['date-time'] as { validate: (value: string) => boolean };
/** The instants a `date-time` may name: what JavaScript's Date, PostgreSQL's timestamptz and RFC 3339's four-digit years all hold. */
const EARLIEST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
const LATEST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * RFC 3339 (ajv-formats' own check), and an instant the service can store and give back: a leap
 * second (`23:59:60`), which Date cannot parse, year 0000, which PostgreSQL refuses, and an offset
 * that carries the instant out of years 0001–9999 are refused.
 */
export function isStorableDateTime(value: string): boolean {
  if (!rfc3339.validate(value) || value.startsWith('0000')) return false;
  const instant = Date.parse(value);
  return instant >= EARLIEST_INSTANT && instant <= LATEST_INSTANT;
}

const BAD_FIELD_NAME = 'is a field name with a NUL character or an unpaired surrogate';

/** What `screen` found: its problems (none for a clean request), and how many values it saw. */
export interface Screening {
  problems: ErrorDetail[];
  /** Every value visited, containers included: validation.ts lists every problem of a small request only. */
  values: number;
}

interface Frame {
  value: object;
  path: string;
  depth: number;
}

/**
 * Screens a request's parts (`[name, value]`, each named as its pointer starts: `path`, `query`,
 * `headers`, `body`) for what no field may hold: strings no store can hold (`unstorable`), numbers
 * that are not finite, nesting deeper than MAX_DEPTH. Walks with a stack of its own, never by
 * recursion (a body can nest as deep as its size allows), stops at MAX_DETAILS problems, and counts
 * the values it saw. Paths are built only for containers and problems: a 1 MiB body holds hundreds
 * of thousands of values.
 */
export function screen(parts: [string, unknown][]): Screening {
  const problems: ErrorDetail[] = [];
  const stack: Frame[] = [];
  let values = 0;
  const visit = (value: unknown, parent: string, key: string, depth: number): void => {
    values += 1;
    let problem: string | undefined;
    if (typeof value === 'string') problem = unstorable(value);
    else if (typeof value === 'number') problem = Number.isFinite(value) ? undefined : 'is a number too large to hold';
    else if (typeof value === 'object' && value !== null) {
      if (depth > MAX_DEPTH) problem = `nests deeper than ${MAX_DEPTH} levels`;
      else stack.push({ value, path: `${parent}/${escapeKey(key)}`, depth });
    }
    if (problem) problems.push({ path: pointer(`${parent}/${escapeKey(key)}`), message: problem });
  };
  for (const [part, value] of parts) visit(value, '', part, 0);
  while (stack.length > 0 && problems.length < MAX_DETAILS) {
    const { value, path, depth } = stack.pop()!;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length && problems.length < MAX_DETAILS; i++) visit(value[i], path, String(i), depth + 1);
      continue;
    }
    for (const key of Object.keys(value)) {
      if (problems.length >= MAX_DETAILS) break;
      if (unstorable(key)) problems.push({ path: pointer(`${path}/${escapeKey(key)}`), message: BAD_FIELD_NAME });
      else visit((value as Record<string, unknown>)[key], path, key, depth + 1);
    }
  }
  return { problems, values };
}
