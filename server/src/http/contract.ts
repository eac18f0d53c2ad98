/**
 * The contract at run time: the generated OpenAPI document, openapi-backend's validators compiled
 * from it, and a route table built once at start-up. openapi-backend's own matcher rebuilds a
 * regular expression per route on every request (cost grows with the contract, see STACK.md), so
 * routing is done here against the precompiled table and the matched operation is handed to
 * openapi-backend's validator.
 */
import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend';
import addFormatsModule from 'ajv-formats';
import generated from '../../../spec/generated/openapi.json' with { type: 'json' };
import type { ErrorObject } from 'ajv';
import type { ErrorDetail } from '../errors.js';
import { MethodNotAllowed, NotFound } from '../errors.js';

// ajv-formats is CommonJS: under ESM its function is the default export's `default`.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (ajv: unknown, formats: string[]) => void;

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
  /** Anonymous callers allowed (an empty requirement `{}` in the operation's `security`): the route checks credentials itself, if at all. */
  isPublic: boolean;
  /** `x-session-only`: an API token is refused with 403 `session_required`. */
  sessionOnly: boolean;
  hasBody: boolean;
  /** Request headers the operation declares (e.g. `Last-Event-ID`). */
  headerNames: string[];
}

interface Route {
  pattern: RegExp;
  paramNames: string[];
  /** Literal characters, to prefer `/invites/mine` over `/invites/{username}` when both match. */
  specificity: number;
  /** Place in `routes` (most specific first): of several templates matching a path, the lowest wins. */
  order: number;
  byMethod: Map<string, ContractOperation>;
}

/**
 * The route table as a tree of path segments: a literal child per segment value and one child for
 * a `{param}` segment. Matching walks the path's segments, so its cost depends on the path's depth,
 * not on the number of routes in the contract.
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

export class Contract {
  readonly document: Document;
  readonly operations: ContractOperation[];
  private readonly routes: Route[];
  private readonly tree: Node | undefined;

  private constructor(private readonly api: OpenAPIBackend, document: Document) {
    this.document = document;
    this.operations = api.getOperations().map((operation) => ({
      operationId: operation.operationId!,
      method: operation.method.toUpperCase(),
      path: operation.path,
      operation,
      isPublic: (operation.security ?? []).some((requirement) => Object.keys(requirement).length === 0),
      sessionOnly: (operation as unknown as Record<string, unknown>)['x-session-only'] === true,
      hasBody: Boolean(operation.requestBody),
      headerNames: (operation.parameters ?? []).flatMap((p) => ('in' in p && p.in === 'header' ? [p.name] : [])),
    }));
    const byPath = new Map<string, Route>();
    for (const op of this.operations) {
      let route = byPath.get(op.path);
      if (!route) {
        const paramNames: string[] = [];
        const source = op.path
          .split(/(\{[^}]+\})/)
          .map((part) => {
            const param = /^\{([^}]+)\}$/.exec(part);
            if (!param) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
            paramNames.push(param[1]!);
            return '([^/]+)';
          })
          .join('');
        route = {
          pattern: new RegExp(`^${source}$`),
          paramNames,
          specificity: op.path.replace(/\{[^}]+\}/g, '').length,
          order: 0,
          byMethod: new Map(),
        };
        byPath.set(op.path, route);
      }
      route.byMethod.set(op.method, op);
    }
    this.routes = [...byPath.values()].sort((a, b) => b.specificity - a.specificity);
    this.routes.forEach((route, i) => (route.order = i));
    // Templates whose parameters are whole segments go into the tree; any other (`/{sha}.png`)
    // makes matching fall back to trying every route's pattern in order.
    const pure = [...byPath.keys()].every((path) => path.split('/').every((segment) => !segment.includes('{') || /^\{[^}]+\}$/.test(segment)));
    if (pure) {
      this.tree = newNode();
      for (const [path, route] of byPath) {
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
  }

  /**
   * Every template matching `segments` from `node` on (a literal branch and a parameter branch may
   * both match); answers the one a linear scan in `routes` order would find first, with the values
   * of its parameters in order.
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
    return new Contract(api, document);
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
      // useDefaults fills parameter defaults from the contract (`limit` = 50), so no handler repeats them.
      ajvOpts: { allErrors: true, strict: false, useDefaults: true },
      customizeAjv: (ajv) => {
        addFormats(ajv, ['email', 'uuid', 'date-time']);
        return ajv;
      },
    });
  }

  /** openapi-backend itself, for measurements only: requests are routed by `match`. */
  get backend(): OpenAPIBackend {
    return this.api;
  }

  /** The operation for a request, or 404 `not_found` / 405 `method_not_allowed`. */
  match(method: string, path: string): RouteMatch {
    const normalized = path.length > 1 ? path.replace(/\/+$/, '') : path;
    if (this.tree) {
      const found = normalized.startsWith('/') ? this.find(this.tree, normalized.split('/'), 1, []) : undefined;
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
    for (const route of this.routes) {
      const found = route.pattern.exec(normalized);
      if (!found) continue;
      const op = route.byMethod.get(method === 'HEAD' ? 'GET' : method);
      if (!op) throw new MethodNotAllowed([...route.byMethod.keys()]);
      const params: Record<string, string> = {};
      try {
        route.paramNames.forEach((name, i) => (params[name] = decodeURIComponent(found[i + 1]!)));
      } catch {
        throw new NotFound('No route matches this path.');
      }
      return { op, params };
    }
    throw new NotFound('No route matches this path.');
  }

  /**
   * Validates parameters and body against the contract. Returns the problems as the envelope's
   * `details`, and on success the query with its types coerced (`limit=10` becomes a number).
   */
  validate(op: ContractOperation, input: ValidationInput, params: Record<string, string>):
    { ok: true; query: Record<string, unknown>; params: Record<string, unknown> } | { ok: false; details: ErrorDetail[] } {
    // openapi-backend's compiled validators, called on what `match` and the body reader already
    // parsed: its `validateRequest` would parse the request again (path template, query, headers,
    // cookies) on every call. Coercion and defaults change these copies in place.
    const parameters = { path: { ...params }, query: { ...input.query }, header: { ...input.headers }, cookie: {}, requestBody: input.body };
    const errors: ErrorObject[] = [];
    for (const validator of this.api.validator.getRequestValidatorsForOperation(op.operationId)) {
      if (!validator(parameters)) errors.push(...(validator.errors ?? []));
    }
    if (errors.length === 0) return { ok: true, query: parameters.query, params: parameters.path };
    const details = errors.map((error): ErrorDetail => {
      const where = error.instancePath.replace(/^\/requestBody/, '/body').replace(/^\/header\//, '/headers/');
      const params = error.params as { additionalProperty?: string; missingProperty?: string };
      if (error.keyword === 'additionalProperties') return { path: `${where}/${params.additionalProperty}`, message: 'is not a field of this request' };
      if (error.keyword === 'required') {
        if (where === '' && params.missingProperty === 'requestBody') return { path: '/body', message: 'a JSON body is required' };
        return { path: `${where}/${params.missingProperty}`, message: 'is required' };
      }
      return { path: where || '/body', message: error.message ?? 'is invalid' };
    });
    return { ok: false, details: dedupe(details) };
  }
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
