/**
 * The contract at run time: the generated OpenAPI document, openapi-backend's validators compiled
 * from it, and a route table built once at start-up. openapi-backend's own matcher rebuilds a
 * regular expression per route on every request (cost grows with the contract, see STACK.md), so
 * routing is done here against the precompiled table and the matched operation is handed to
 * openapi-backend's validator.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend';
import addFormatsModule from 'ajv-formats';
import type { ErrorDetail } from '../errors.js';
import { MethodNotAllowed, NotFound } from '../errors.js';

// ajv-formats is CommonJS: under ESM its function is the default export's `default`.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (ajv: unknown, formats: string[]) => void;

export const openapiPath = fileURLToPath(new URL('../../../spec/generated/openapi.json', import.meta.url));

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
  byMethod: Map<string, ContractOperation>;
}

export interface RouteMatch {
  op: ContractOperation;
  params: Record<string, string>;
}

export interface ValidationInput {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
}

export class Contract {
  readonly document: Document;
  readonly operations: ContractOperation[];
  private readonly routes: Route[];

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
          byMethod: new Map(),
        };
        byPath.set(op.path, route);
      }
      route.byMethod.set(op.method, op);
    }
    this.routes = [...byPath.values()].sort((a, b) => b.specificity - a.specificity);
  }

  static async load(): Promise<Contract> {
    const document = JSON.parse(readFileSync(openapiPath, 'utf8')) as Document;
    const api = new OpenAPIBackend({
      definition: structuredClone(document),
      strict: true,
      validate: true,
      coerceTypes: true,
      // useDefaults fills parameter defaults from the contract (`limit` = 50), so no handler repeats them.
      ajvOpts: { allErrors: true, strict: false, useDefaults: true },
      customizeAjv: (ajv) => {
        addFormats(ajv, ['email', 'uuid', 'date-time']);
        return ajv;
      },
    });
    await api.init();
    return new Contract(api, document);
  }

  /** The operation for a request, or 404 `not_found` / 405 `method_not_allowed`. */
  match(method: string, path: string): RouteMatch {
    const normalized = path.length > 1 ? path.replace(/\/+$/, '') : path;
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
    const result = this.api.validator.validateRequest({ ...input, params } as never, op.operation);
    if (result.valid) {
      return { ok: true, query: (result.coerced?.query ?? {}) as Record<string, unknown>, params: (result.coerced?.params ?? params) as Record<string, unknown> };
    }
    const details = (result.errors ?? []).map((error): ErrorDetail => {
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
