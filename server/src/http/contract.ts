/**
 * The contract at run time: the generated OpenAPI document, what the pipeline needs to know of each
 * of its operations (`ContractOperation`: who may call it, whether it reads a body, the headers it
 * declares), and `Contract`, the one object the rest of the service holds of it. `Contract` is
 * loaded once at start-up (server.ts) and answers the two questions dispatch.ts asks of every
 * request, each in a module of its own:
 *
 * - which operation is this? (`match`: router.ts)
 * - does it hold to that operation? (`validate`: validation.ts, which screens for what no request
 *   may hold first, hostile-input.ts, and words the problems as validation-errors.ts does)
 */
import type { Document, OpenAPIBackend, Operation } from 'openapi-backend';
import generated from '../../../spec/generated/openapi.json' with { type: 'json' };
import type { TokenScope } from '../policies/project.js';
import type { ContractOperation } from './contract-operation.js';
import { IDEMPOTENCY_KEY } from './idempotency.js';
import { RouteTable, type RouteMatch } from './router.js';
import { openapiBackend, RequestValidation, type Validated, type ValidationInput } from './validation.js';

/**
 * The generated contract (spec/generated/openapi.json). Imported rather than read by path, so the
 * compiled service in dist/ carries its own copy (tsc emits it beside the code). Shared: never mutate.
 */
export const contractDocument = generated as unknown as Document;

const SCOPES: readonly string[] = ['all', 'events:write', 'insights:write', 'read'] satisfies TokenScope[];

/** The operation's `x-scope`; `all` when it has none. Throws for a value the policy does not know, which it could not honour. */
function scopeOf(operation: Operation): TokenScope {
  const scope = (operation as unknown as Record<string, unknown>)['x-scope'];
  if (scope === undefined) return 'all';
  if (typeof scope !== 'string' || !SCOPES.includes(scope))
    throw new Error(`${operation.operationId}: unknown x-scope ${JSON.stringify(scope)}`);
  return scope as TokenScope;
}

/** A schema of the dereferenced document, as far as `secretFieldsOf` reads it. */
interface SchemaParts {
  properties?: Record<string, SchemaParts & { 'x-secret'?: unknown }>;
  required?: string[];
  allOf?: SchemaParts[];
  items?: SchemaParts;
}

/**
 * The paths to the `x-secret` fields of the operation's success answers. A replay leaves them out,
 * so the contract must let them be absent: throws for one it requires.
 */
function secretFieldsOf(operation: Operation): string[][] {
  const found = new Map<string, string[]>();
  const visit = (schema: SchemaParts, at: string[], within: Set<SchemaParts>): void => {
    if (within.has(schema)) return;
    const inside = new Set(within).add(schema);
    for (const part of schema.allOf ?? []) visit(part, at, inside);
    if (schema.items) visit(schema.items, [...at, '*'], inside);
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      if (property['x-secret'] !== true) visit(property, [...at, name], inside);
      else if (schema.required?.includes(name))
        throw new Error(`${operation.operationId}: x-secret ${name} is required, but a replay leaves it out`);
      else found.set([...at, name].join('/'), [...at, name]);
    }
  };
  for (const [status, response] of Object.entries(operation.responses ?? {})) {
    const schema = (response as { content?: Record<string, { schema?: SchemaParts }> }).content?.['application/json']?.schema;
    if (status.startsWith('2') && schema) visit(schema, [], new Set());
  }
  return [...found.values()];
}

/** What the pipeline reads of one operation; throws for a declaration it could not honour. */
function readOperation(operation: Operation): ContractOperation {
  const headerNames = (operation.parameters ?? []).flatMap((p) => ('in' in p && p.in === 'header' ? [p.name] : []));
  const op = {
    operationId: operation.operationId!,
    method: operation.method.toUpperCase(),
    path: operation.path,
    operation,
    isPublic: (operation.security ?? []).some((requirement) => Object.keys(requirement).length === 0),
    sessionOnly: (operation as unknown as Record<string, unknown>)['x-session-only'] === true,
    scope: scopeOf(operation),
    namesProject: operation.path.includes('/{namespace}'),
    cors: (operation as unknown as Record<string, unknown>)['x-cors'] === true,
    hasBody: Boolean(operation.requestBody),
    rawBody: (operation as unknown as Record<string, unknown>)['x-raw-body'] === true,
    headerNames,
    listQuery: (operation.parameters ?? []).flatMap((p) =>
      'in' in p && p.in === 'query' && p.schema && 'type' in p.schema && p.schema.type === 'array' ? [p.name] : [],
    ),
    takesIdempotencyKey: headerNames.includes(IDEMPOTENCY_KEY),
    secretFields: secretFieldsOf(operation),
    logsnag: (operation as unknown as Record<string, unknown>)['x-logsnag'] === true,
  };
  // A key belongs to a user and is matched on the parsed body: an anonymous or raw-body route could not honour one.
  if (op.takesIdempotencyKey && (op.isPublic || op.rawBody)) {
    throw new Error(`${op.operationId}: ${IDEMPOTENCY_KEY} needs a credential and a parsed body`);
  }
  return op;
}

export class Contract {
  readonly operations: ContractOperation[];
  private readonly routes: RouteTable;
  private readonly validation: RequestValidation;

  private constructor(private readonly api: OpenAPIBackend) {
    this.operations = api.getOperations().map(readOperation);
    this.routes = new RouteTable(this.operations);
    this.validation = new RequestValidation(api);
  }

  /**
   * The generated contract, or `document` (the bench measures routing with a contract of one route).
   * Request validators are compiled on each operation's first request (about 15 ms each, 0.5 s for
   * all of them at once, the largest part of a cold start).
   */
  static async load(document: Document = contractDocument): Promise<Contract> {
    const api = openapiBackend(document);
    await api.init();
    return new Contract(api);
  }

  /**
   * Throws unless `document` is valid OpenAPI (openapi-backend's strict check, which its full mode
   * runs at every start). The served document is generated and committed, so the tests run this
   * (tests/contract/contract.test.ts) rather than each start (about 0.2 s).
   */
  static async checkDocument(document: Document = contractDocument): Promise<void> {
    const api = openapiBackend(document);
    await api.loadDocument();
    api.validateDefinition();
  }

  /** openapi-backend itself, for measurements only: requests are routed by `match`. */
  get backend(): OpenAPIBackend {
    return this.api;
  }

  /** The operation for a request, or 404 `not_found` / 405 `method_not_allowed` (router.ts). */
  match(method: string, path: string): RouteMatch {
    return this.routes.match(method, path);
  }

  /** The request held to its operation (validation.ts): its problems, or its parameters coerced. */
  validate(op: ContractOperation, input: ValidationInput, params: Record<string, string>): Validated {
    return this.validation.validate(op, input, params);
  }

  /** Checks the body an `x-raw-body` operation's handler parsed, as `validate` checks any other body; 400 if it fails. */
  validateBody(op: ContractOperation, body: unknown): void {
    this.validation.validateBody(op, body);
  }
}
