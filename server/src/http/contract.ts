/**
 * The contract at run time: the generated OpenAPI document, openapi-backend's validators compiled
 * from it, and a route tree built once at start-up. openapi-backend's own matcher rebuilds a
 * regular expression per route on every request (its cost grows with the contract), so routing is
 * done here against the precompiled tree and the matched operation is handed to openapi-backend's
 * validator.
 *
 * Validation also holds every request to what the service can store and what the validator can
 * afford, whatever the contract says of a field (see `screen`), and its cost is bounded by the
 * request, not by how many problems the request has (see `validate`).
 */
import { OpenAPIBackend, OpenAPIValidator, type AjvCustomizer, type Document, type Operation } from 'openapi-backend';
import addFormatsModule from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import generated from '../../../spec/generated/openapi.json' with { type: 'json' };
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { ErrorDetail } from '../errors.js';
import { InvalidRequest, MethodNotAllowed, NotFound } from '../errors.js';
import { IDEMPOTENCY_KEY } from './idempotency.js';

// ajv-formats is CommonJS: under ESM its function is the default export's `default`.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (
  ajv: unknown,
  formats: string[],
) => void;

/**
 * The generated contract (spec/generated/openapi.json). Imported rather than read by path, so the
 * compiled service in dist/ carries its own copy (tsc emits it beside the code). Shared: never mutate.
 */
export const contractDocument = generated as unknown as Document;

export interface ContractOperation {
  operationId: string;
  method: string;
  path: string;
  operation: Operation;
  /**
   * Anonymous callers allowed (an empty requirement `{}` in the operation's `security`): the route
   * checks credentials itself, if at all.
   */
  isPublic: boolean;
  /** `x-session-only`: an API token is refused with 403 `session_required`. */
  sessionOnly: boolean;
  hasBody: boolean;
  /** `x-raw-body`: the handler reads the body's bytes itself; the pipeline neither reads nor parses them. */
  rawBody: boolean;
  /** Request headers the operation declares (e.g. `Last-Event-ID`). */
  headerNames: string[];
  /** Declares `Idempotency-Key`: a write the pipeline makes safe to retry (http/idempotency.ts). */
  takesIdempotencyKey: boolean;
}

/** One path template of the contract, with its operations by method. */
interface Route {
  paramNames: string[];
  /**
   * Rank by literal characters, most first: of several templates matching a path, the lowest wins,
   * so `/invites/mine` is preferred over `/invites/{username}`.
   */
  order: number;
  byMethod: Map<string, ContractOperation>;
}

/**
 * The route table as a tree of path segments: a literal child per segment value and one child for
 * a `{param}` segment. Matching walks the path's segments, so its cost depends on the path's depth,
 * not on the number of routes in the contract. Every template's parameters are whole segments
 * (`/feeds/{feed}`, never `/{sha}.png`), which `Contract` checks when it loads a document.
 */
interface Node {
  literal: Map<string, Node>;
  param: Node | undefined;
  /** Templates that end at this node. */
  routes: Route[];
}

const newNode = (): Node => ({ literal: new Map(), param: undefined, routes: [] });

export interface RouteMatch {
  op: ContractOperation;
  params: Record<string, string>;
}

export interface ValidationInput {
  headers: Record<string, string | string[] | undefined>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
}

// ---------- What every request is held to, whatever the contract says of a field ----------

/** The contract's bodies nest a few levels deep; a request nesting past this is hostile, not detailed. */
const MAX_DEPTH = 32;
/** The most problems one answer lists (the contract's `ErrorBody.details` has `maxItems: 20`). */
const MAX_DETAILS = 20;
/** Requests of up to this many values get every problem listed; larger ones their first (see `validate`). */
const DETAILED_VALUES = 256;
/** Of ajv's errors, the most read before de-duplication: enough for MAX_DETAILS distinct ones in practice. */
const MAX_ERRORS_READ = 100;
/** A path in `details` is cut to this many characters: a field name can be as long as the body. */
const MAX_POINTER_LENGTH = 200;

/** `String.prototype.isWellFormed` (Node 20; not yet in TypeScript's ES2022 library): false when a surrogate lacks its pair. */
const isWellFormed = (String.prototype as unknown as { isWellFormed(this: string): boolean }).isWellFormed;

/**
 * Why no store can hold a string, if none can: NUL (PostgreSQL's text and jsonb refuse it), or a
 * UTF-16 surrogate without its pair (not Unicode: UTF-8 cannot encode it, so it would be stored as
 * something else than was sent).
 */
function unstorable(value: string): string | undefined {
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
function isStorableDateTime(value: string): boolean {
  if (!rfc3339.validate(value) || value.startsWith('0000')) return false;
  const instant = Date.parse(value);
  return instant >= EARLIEST_INSTANT && instant <= LATEST_INSTANT;
}

/** useDefaults fills parameter defaults from the contract (`limit` = 50), so no handler repeats them. */
const AJV_OPTIONS = { allErrors: true, strict: false, useDefaults: true } as const;

const customizeAjv: AjvCustomizer = (ajv) => {
  addFormats(ajv, ['email', 'uuid']);
  ajv.addFormat('date-time', { type: 'string', validate: isStorableDateTime });
  return ajv;
};

function escapeKey(key: string): string {
  // Nearly every key has neither character: checked before the two replacements are paid for.
  if (!key.includes('~') && !key.includes('/')) return key;
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

function pointer(path: string): string {
  return path.length > MAX_POINTER_LENGTH ? `${path.slice(0, MAX_POINTER_LENGTH)}…` : path;
}

const BAD_FIELD_NAME = 'is a field name with a NUL character or an unpaired surrogate';

interface Frame {
  value: object;
  path: string;
  depth: number;
}

/**
 * Refuses what no field of any contract may hold, in every part of a request alike: strings (values
 * and field names) no store can hold (`unstorable`), numbers JSON can spell but JavaScript cannot
 * hold (`1e309` parses to Infinity), and nesting deeper than MAX_DEPTH. Walks with a stack of its
 * own, never by recursion (a body can nest as deep as its size allows), stops at MAX_DETAILS
 * problems, and counts the values it saw. Paths are built only for containers and problems: a
 * 1 MiB body holds hundreds of thousands of values.
 */
function screen(parts: [string, unknown][]): { problems: ErrorDetail[]; values: number } {
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

export class Contract {
  readonly operations: ContractOperation[];
  private readonly tree: Node = newNode();
  /**
   * The templates without parameters, by path. A path equal to one is matched by no other template
   * with as many literal characters (a parameter stands for a whole, non-empty segment), so it is
   * the answer the tree would give, without the walk.
   */
  private readonly literalRoutes = new Map<string, Route>();
  /** The same validators compiled to stop at their first error, for requests too large to list all of theirs. */
  private readonly firstProblem: OpenAPIValidator;

  private constructor(private readonly api: OpenAPIBackend) {
    this.firstProblem = new OpenAPIValidator({
      definition: api.definition,
      router: api.router,
      lazyCompileValidators: true,
      coerceTypes: true,
      ajvOpts: { ...AJV_OPTIONS, allErrors: false },
      customizeAjv,
    });
    this.operations = api.getOperations().map((operation) => {
      const headerNames = (operation.parameters ?? []).flatMap((p) => ('in' in p && p.in === 'header' ? [p.name] : []));
      const op = {
        operationId: operation.operationId!,
        method: operation.method.toUpperCase(),
        path: operation.path,
        operation,
        isPublic: (operation.security ?? []).some((requirement) => Object.keys(requirement).length === 0),
        sessionOnly: (operation as unknown as Record<string, unknown>)['x-session-only'] === true,
        hasBody: Boolean(operation.requestBody),
        rawBody: (operation as unknown as Record<string, unknown>)['x-raw-body'] === true,
        headerNames,
        takesIdempotencyKey: headerNames.includes(IDEMPOTENCY_KEY),
      };
      // A key belongs to a user and is matched on the parsed body: an anonymous or raw-body route could not honour one.
      if (op.takesIdempotencyKey && (op.isPublic || op.rawBody)) {
        throw new Error(`${op.operationId}: ${IDEMPOTENCY_KEY} needs a credential and a parsed body`);
      }
      return op;
    });
    const byPath = new Map<string, Route>();
    for (const op of this.operations) {
      let route = byPath.get(op.path);
      if (!route) {
        const segments = op.path.split('/').slice(1);
        const partial = segments.find((segment) => segment.includes('{') && !/^\{[^}]+\}$/.test(segment));
        if (partial !== undefined) throw new Error(`${op.path}: a path parameter must be a whole segment, not part of "${partial}"`);
        const paramNames = segments.filter((segment) => segment.startsWith('{')).map((segment) => segment.slice(1, -1));
        route = { paramNames, order: 0, byMethod: new Map() };
        byPath.set(op.path, route);
      }
      route.byMethod.set(op.method, op);
    }
    const literalLength = (path: string) => path.replace(/\{[^}]+\}/g, '').length;
    [...byPath].sort(([a], [b]) => literalLength(b) - literalLength(a)).forEach(([, route], i) => (route.order = i));
    for (const [path, route] of byPath) {
      if (route.paramNames.length === 0) this.literalRoutes.set(path, route);
      let node = this.tree;
      for (const segment of path.split('/').slice(1)) {
        if (segment.startsWith('{')) node = node.param ??= newNode();
        else {
          let next = node.literal.get(segment);
          if (!next) node.literal.set(segment, (next = newNode()));
          node = next;
        }
      }
      node.routes.push(route);
    }
  }

  /**
   * Every template matching `segments` from `node` on (a literal branch and a parameter branch may
   * both match); answers the one of lowest `order`, with the values of its parameters in order.
   */
  private find(node: Node, segments: string[], at: number, values: string[]): { route: Route; values: string[] } | undefined {
    if (at === segments.length) {
      let best: Route | undefined;
      for (const route of node.routes) if (!best || route.order < best.order) best = route;
      return best && { route: best, values: [...values] };
    }
    const segment = segments[at]!;
    const literal = node.literal.get(segment);
    const byLiteral = literal ? this.find(literal, segments, at + 1, values) : undefined;
    let byParam: { route: Route; values: string[] } | undefined;
    if (node.param && segment !== '') {
      values.push(segment);
      byParam = this.find(node.param, segments, at + 1, values);
      values.pop();
    }
    if (!byLiteral) return byParam;
    if (!byParam) return byLiteral;
    return byLiteral.route.order < byParam.route.order ? byLiteral : byParam;
  }

  /**
   * The generated contract, or `document` (the bench measures routing with a contract of one route).
   * Request validators are compiled on each operation's first request (about 15 ms each, 0.5 s for
   * all of them at once, the largest part of a cold start).
   */
  static async load(document: Document = contractDocument): Promise<Contract> {
    const api = Contract.backend(document);
    await api.init();
    return new Contract(api);
  }

  /**
   * Throws unless `document` is valid OpenAPI (openapi-backend's strict check, which its full mode
   * runs at every start). The served document is generated and committed, so the tests run this
   * (tests/contract.test.ts) rather than each start (about 0.2 s).
   */
  static async checkDocument(document: Document = contractDocument): Promise<void> {
    const api = Contract.backend(document);
    await api.loadDocument();
    api.validateDefinition();
  }

  private static backend(document: Document): OpenAPIBackend {
    return new OpenAPIBackend({
      definition: structuredClone(document),
      strict: true,
      validate: true,
      coerceTypes: true,
      // Quick mode compiles no validator up front: the full mode would also compile a response and a
      // response-header validator per operation (about 3 s here), which the service never uses.
      quick: true,
      ajvOpts: AJV_OPTIONS,
      customizeAjv,
    });
  }

  /** openapi-backend itself, for measurements only: requests are routed by `match`. */
  get backend(): OpenAPIBackend {
    return this.api;
  }

  /** The operation for a request, or 404 `not_found` / 405 `method_not_allowed`. */
  match(method: string, path: string): RouteMatch {
    const normalized = path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : path;
    const literal = this.literalRoutes.get(normalized);
    const found = literal
      ? { route: literal, values: [] }
      : normalized.startsWith('/')
        ? this.find(this.tree, normalized.split('/'), 1, [])
        : undefined;
    if (!found) throw new NotFound('No route matches this path.');
    const op = found.route.byMethod.get(method === 'HEAD' ? 'GET' : method);
    if (!op) throw new MethodNotAllowed([...found.route.byMethod.keys()]);
    const params: Record<string, string> = {};
    try {
      found.route.paramNames.forEach((name, i) => (params[name] = decodeURIComponent(found.values[i]!)));
    } catch {
      throw new NotFound('No route matches this path.');
    }
    return { op, params };
  }

  /**
   * Validates a request against the contract: first `screen`, then the operation's validators.
   * Returns the problems as the envelope's `details` (at most MAX_DETAILS), and on success the
   * query and path parameters with their types coerced (`limit=10` becomes a number). The body of
   * an `x-raw-body` operation is not part of the request here: its handler checks it with
   * `validateBody` once it has parsed it.
   *
   * A request of up to DETAILED_VALUES values is checked for all its problems; a larger one only up
   * to its first, so that the work and the answer stay bounded by the request and not by the
   * number of its faults (60,000 bad tag values would otherwise be 60,000+ error objects).
   */
  validate(
    op: ContractOperation,
    input: ValidationInput,
    params: Record<string, string>,
  ): { ok: true; query: Record<string, unknown>; params: Record<string, unknown> } | { ok: false; details: ErrorDetail[] } {
    const body = op.rawBody ? undefined : input.body;
    const screened = screen([
      ['path', params],
      ['query', input.query],
      ['headers', input.headers],
      ['body', body],
    ]);
    if (screened.problems.length > 0) return { ok: false, details: screened.problems };
    // openapi-backend's compiled validators, called on what `match` and the body reader already
    // parsed: its `validateRequest` would parse the request again (path template, query, headers,
    // cookies) on every call. Coercion and defaults change these copies in place.
    const parameters = { path: { ...params }, query: { ...input.query }, header: { ...input.headers }, cookie: {}, requestBody: body };
    const details = this.check(op, parameters, screened.values, (validator) => !op.rawBody || !checksBody(validator));
    return details.length > 0 ? { ok: false, details } : { ok: true, query: parameters.query, params: parameters.path };
  }

  /** Checks the body an `x-raw-body` operation's handler parsed, as `validate` checks any other body; 400 if it fails. */
  validateBody(op: ContractOperation, body: unknown): void {
    const screened = screen([['body', body]]);
    const details = screened.problems.length > 0 ? screened.problems : this.check(op, { requestBody: body }, screened.values, checksBody);
    if (details.length > 0) throw invalidRequest(details);
  }

  private check(op: ContractOperation, parameters: object, values: number, applies: (v: ValidateFunction) => boolean): ErrorDetail[] {
    const compiled = values > DETAILED_VALUES ? this.firstProblem : this.api.validator;
    const validators = compiled.getRequestValidatorsForOperation(op.operationId) ?? [];
    const errors: ErrorObject[] = [];
    for (const validator of validators) {
      if (!applies(validator) || validator(parameters)) continue;
      // One by one, never spread: ajv's list is as long as the request is bad.
      for (const error of validator.errors ?? []) {
        if (errors.length === MAX_ERRORS_READ) break;
        errors.push(error);
      }
    }
    if (errors.length === 0) return [];
    return dedupe(errors.map(toDetail)).slice(0, MAX_DETAILS);
  }
}

/** The 400 for a request that fails validation: the first problem in the message, all in `details`. */
export function invalidRequest(details: ErrorDetail[]): InvalidRequest {
  const [first] = details;
  const more = details.length > 1 ? ` (and ${details.length - 1} more, see details)` : '';
  return new InvalidRequest(`Invalid request: ${first?.path} ${first?.message}${more}.`, details);
}

/** Whether a compiled validator is the one for the body (openapi-backend compiles one for the body, one for the parameters). */
function checksBody(validator: ValidateFunction): boolean {
  return (validator.schema as { properties?: Record<string, unknown> }).properties?.requestBody !== undefined;
}

function toDetail(error: ErrorObject): ErrorDetail {
  const where = error.instancePath.replace(/^\/requestBody/, '/body').replace(/^\/header\//, '/headers/');
  const params = error.params as { additionalProperty?: string; missingProperty?: string };
  if (error.keyword === 'additionalProperties') {
    return { path: pointer(`${where}/${escapeKey(params.additionalProperty ?? '')}`), message: 'is not a field of this request' };
  }
  if (error.keyword === 'required') {
    if (where === '' && params.missingProperty === 'requestBody') return { path: '/body', message: 'a JSON body is required' };
    return { path: pointer(`${where}/${params.missingProperty}`), message: 'is required' };
  }
  return { path: pointer(where || '/body'), message: error.message ?? 'is invalid' };
}

function dedupe(details: ErrorDetail[]): ErrorDetail[] {
  const seen = new Set<string>();
  return details.filter((d) => {
    const key = `${d.path}\u0000${d.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
