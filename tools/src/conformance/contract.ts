/**
 * The contract as the suite reads it: an OpenAPI document from disk (the copy this package carries,
 * or spec/generated/openapi.json in the repository), nothing from the server's code. It lists the
 * operations (method, path template, documented statuses, `x-session-only`, `x-scope`), routes a request path
 * to its operation the way any HTTP client reading the document would, and judges an answer with a
 * third-party validator (openapi-response-validator: its own Ajv and OpenAPI 3 → JSON Schema
 * translation) plus the rules the document states in words: required headers and their bounds, the
 * documented content type, no body where none is documented, the error code among those the
 * response's description names, a Bearer challenge on 401. It is the one judge of answers in the
 * repository: the suite's, the tests' (tests/support/response-check.ts) and the fuzzer's.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAPIResponseValidatorModule from 'openapi-response-validator';
import type { OpenAPIV3 } from 'openapi-types';

// openapi-response-validator is CommonJS with an `exports.default`: under ESM that is `.default`.
type ValidatorClass = typeof import('openapi-response-validator').default;
const OpenAPIResponseValidator = ((OpenAPIResponseValidatorModule as unknown as { default?: ValidatorClass }).default ??
  OpenAPIResponseValidatorModule) as ValidatorClass;
type Validator = InstanceType<ValidatorClass>;

/**
 * Where the contract is. Built (tools/dist/conformance/contract.js, what npm ships) there is no
 * repository around the package, so the build copies spec/generated/openapi.json to
 * tools/dist/openapi.json and the suite reads that copy: a published version judges by the contract
 * it was released with. Run from source (tsx, in the repository: `npm run conformance`, the tests) it
 * reads spec/generated/openapi.json itself, so a change to the spec is judged by at once, with no
 * build. Which one is decided by this module's own file, not by probing for files: a missing copy is
 * an error, never a silent fall-back to some other document.
 */
function defaultContractPath(): string {
  const here = import.meta.url;
  const fromSource = here.endsWith('.ts');
  return fileURLToPath(new URL(fromSource ? '../../../spec/generated/openapi.json' : '../openapi.json', here));
}

export const DEFAULT_CONTRACT_PATH = defaultContractPath();

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

export interface Operation {
  operationId: string;
  /** Upper case. */
  method: string;
  /** The path template, e.g. `/v1/projects/{namespace}`. */
  path: string;
  /** `METHOD /path`, the key cases name operations by. */
  key: string;
  summary: string;
  /** Documented statuses, as numbers, in document order. */
  statuses: number[];
  responses: Record<string, OpenAPIV3.ResponseObject>;
  /** No credential needed (`security` holds an empty requirement). */
  isPublic: boolean;
  /** `x-session-only`: API tokens are refused (403 `session_required`). */
  sessionOnly: boolean;
  /** `x-scope`: the scope an API token needs to call it (403 `insufficient_scope` without); undefined where tokens do not reach. */
  scope: string | undefined;
  hasBody: boolean;
  /** `x-caller` (e.g. `stripe` for the webhook). */
  caller: string | undefined;
  /** The request headers it declares, lower case (`idempotency-key`, `if-none-match`). */
  requestHeaders: string[];
  /** The first example of its JSON request body; undefined when it documents none. */
  requestExample: unknown;
}

/** What the suite got back, as far as the contract is concerned. */
export interface AnswerToJudge {
  method: string;
  /** The path as sent (no query). */
  path: string;
  status: number;
  /** The answer's headers: fetch's `Headers`, or any object that looks a header up by name the same way. */
  headers: { get(name: string): string | null };
  /** The body as text; undefined when it was deliberately not read (event streams). */
  body: string | undefined;
}

export type RouteResult = { kind: 'operation'; op: Operation } | { kind: 'not-found' } | { kind: 'method-not-allowed'; allow: string[] };

/** Formats the contract uses, checked by definitions of the suite's own. */
const RFC3339 =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const customFormats = {
  'date-time': (value: unknown) => typeof value !== 'string' || (RFC3339.test(value) && !Number.isNaN(Date.parse(value))),
  uuid: (value: unknown) => typeof value !== 'string' || UUID.test(value),
  email: (value: unknown) => typeof value !== 'string' || /^[^\s@]+@[^\s@]+$/.test(value),
  uri: (value: unknown) => typeof value !== 'string' || URL.canParse(value),
  int32: (value: unknown) => typeof value !== 'number' || (Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31),
  int64: () => true,
  double: () => true,
  float: () => true,
};

interface Route {
  pattern: RegExp;
  specificity: number;
  byMethod: Map<string, Operation>;
}

export class ContractModel {
  readonly operations: Operation[];
  readonly errorCodes: string[];
  private readonly routes: Route[];
  private readonly validators = new Map<string, Validator>();
  private readonly byKey = new Map<string, Operation>();

  constructor(readonly document: OpenAPIV3.Document) {
    this.operations = [];
    for (const [path, item] of Object.entries(document.paths ?? {})) {
      for (const method of METHODS) {
        const operation = (item as Record<string, unknown>)[method] as (OpenAPIV3.OperationObject & Record<string, unknown>) | undefined;
        if (!operation) continue;
        const responses = this.resolveResponses(operation.responses ?? {});
        const security = operation.security ?? document.security ?? [];
        const op: Operation = {
          operationId: operation.operationId ?? `${method} ${path}`,
          method: method.toUpperCase(),
          path,
          key: `${method.toUpperCase()} ${path}`,
          summary: operation.summary ?? '',
          statuses: Object.keys(responses)
            .filter((s) => /^\d{3}$/.test(s))
            .map(Number),
          responses,
          isPublic: security.length === 0 || security.some((requirement) => Object.keys(requirement).length === 0),
          sessionOnly: operation['x-session-only'] === true,
          scope: typeof operation['x-scope'] === 'string' ? operation['x-scope'] : undefined,
          hasBody: Boolean(operation.requestBody),
          caller: typeof operation['x-caller'] === 'string' ? operation['x-caller'] : undefined,
          requestHeaders: (operation.parameters ?? [])
            .map((parameter) => this.resolve<OpenAPIV3.ParameterObject>(parameter, 'parameters'))
            .filter((parameter) => parameter?.in === 'header')
            .map((parameter) => parameter!.name.toLowerCase()),
          requestExample: this.requestExample(operation.requestBody),
        };
        this.operations.push(op);
        this.byKey.set(op.key, op);
      }
    }
    const codes = (document.components?.schemas?.ErrorCode as OpenAPIV3.SchemaObject | undefined)?.enum;
    this.errorCodes = Array.isArray(codes) ? codes.map(String) : [];

    const byPath = new Map<string, Route>();
    for (const op of this.operations) {
      let route = byPath.get(op.path);
      if (!route) {
        const source = op.path
          .split(/(\{[^}]+\})/)
          .map((part) => (/^\{[^}]+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
          .join('');
        route = { pattern: new RegExp(`^${source}$`), specificity: op.path.replace(/\{[^}]+\}/g, '').length, byMethod: new Map() };
        byPath.set(op.path, route);
      }
      route.byMethod.set(op.method, op);
    }
    this.routes = [...byPath.values()].sort((a, b) => b.specificity - a.specificity);
  }

  static load(file: string = DEFAULT_CONTRACT_PATH): ContractModel {
    return new ContractModel(JSON.parse(readFileSync(file, 'utf8')) as OpenAPIV3.Document);
  }

  get title(): string {
    return `${this.document.info?.title ?? 'API'} ${this.document.info?.version ?? ''}`.trim();
  }

  /** The operation a case names as `METHOD /template`. */
  operation(key: string): Operation | undefined {
    return this.byKey.get(key);
  }

  /** Which operation a request reaches: the most specific template that matches the path. */
  route(method: string, path: string): RouteResult {
    const normalized = path.length > 1 ? path.replace(/\/+$/, '') : path;
    for (const route of this.routes) {
      if (!route.pattern.test(normalized)) continue;
      const op = route.byMethod.get(method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase());
      if (!op) return { kind: 'method-not-allowed', allow: [...route.byMethod.keys()] };
      return { kind: 'operation', op };
    }
    return { kind: 'not-found' };
  }

  /** Error codes the response's description names (`401 \`unauthenticated\` (or \`invalid_credentials\` …)`); empty: any. */
  codesNamedFor(op: Operation, status: number): string[] {
    const description = op.responses[String(status)]?.description ?? '';
    return [...description.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).filter((code) => this.errorCodes.includes(code));
  }

  /**
   * The problems of one answer; empty when it matches the contract. A request no operation has must
   * get 404 (unknown path) or 405 with `Allow` (a method the path does not have), in the error envelope.
   */
  judge(received: AnswerToJudge): string[] {
    const method = received.method.toUpperCase();
    // HTTP: an answer to HEAD is the GET answer's status and headers, never a body.
    const answer = method === 'HEAD' ? { ...received, body: undefined } : received;
    const contentType = answer.headers.get('content-type');
    // CORS (the contract's conventions): with allowed origins configured, the preflight of an
    // operation marked `x-cors` is answered before the operation, 204 with Access-Control-Allow-Origin and no body.
    if (method === 'OPTIONS' && answer.status === 204 && answer.headers.get('access-control-allow-origin') !== null) {
      return answer.body ? [`a CORS preflight answer with a body: ${answer.body.slice(0, 120)}`] : [];
    }
    const routed = this.route(method, answer.path);
    if (routed.kind !== 'operation') {
      const expected = routed.kind === 'not-found' ? 404 : 405;
      const problems: string[] = [];
      if (answer.status !== expected)
        problems.push(
          `no operation has this ${routed.kind === 'not-found' ? 'path' : 'method'}: expected ${expected}, got ${answer.status}`,
        );
      if (routed.kind === 'method-not-allowed' && answer.status === 405 && !answer.headers.get('allow'))
        problems.push('405 without an Allow header');
      problems.push(...this.validateJson(this.envelope(), answer, contentType));
      return problems;
    }
    const op = routed.op;
    const documented = op.responses[String(answer.status)] ?? op.responses[`${String(answer.status)[0]}XX`] ?? op.responses.default;
    if (!documented) {
      const problems = [`status ${answer.status} is not documented for ${op.key} (documented: ${op.statuses.join(', ')})`];
      if (answer.status >= 400) problems.push(...this.validateJson(this.envelope(), answer, contentType));
      return problems;
    }
    const problems: string[] = [];
    for (const [name, header] of Object.entries(documented.headers ?? {})) {
      const value = answer.headers.get(name);
      const definition = header as OpenAPIV3.HeaderObject;
      if (value === null) {
        if (definition.required) problems.push(`required header ${name} is missing`);
        continue;
      }
      const schema = definition.schema as OpenAPIV3.SchemaObject | undefined;
      if (schema?.type === 'integer') {
        const number = /^-?\d+$/.test(value.trim()) ? Number(value.trim()) : Number.NaN;
        if (Number.isNaN(number)) problems.push(`header ${name} is not an integer: "${value}"`);
        else if ((schema.minimum !== undefined && number < schema.minimum) || (schema.maximum !== undefined && number > schema.maximum)) {
          problems.push(`header ${name} is ${number}, outside ${schema.minimum ?? '…'}–${schema.maximum ?? '…'}`);
        }
      } else if (schema?.type === 'string' && schema.maxLength !== undefined && value.length > schema.maxLength) {
        problems.push(`header ${name} is longer than ${schema.maxLength} characters`);
      }
    }
    // The contract's conventions (main.tsp): a 401 carries `WWW-Authenticate: Bearer`.
    if (answer.status === 401) {
      const challenge = answer.headers.get('www-authenticate');
      if (challenge !== null && !/^bearer\b/i.test(challenge.trim()))
        problems.push(`WWW-Authenticate is "${challenge}", not a Bearer challenge`);
    }
    const mediaTypes = Object.keys(documented.content ?? {});
    if (mediaTypes.length === 0) {
      if (answer.body !== undefined && answer.body !== '')
        problems.push(`a body was sent where the contract documents none: ${answer.body.slice(0, 120)}`);
      return problems;
    }
    const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
    if (!mediaTypes.includes(type)) {
      problems.push(`Content-Type "${contentType ?? ''}" is not the documented ${mediaTypes.join(' or ')}`);
      return problems;
    }
    if (type !== 'application/json') return problems;
    const bodyProblems = this.validateJson(this.validatorFor(op), answer, contentType);
    problems.push(...bodyProblems);
    if (bodyProblems.length === 0 && answer.status >= 400 && answer.body) {
      const code = (JSON.parse(answer.body) as { error?: { code?: unknown } }).error?.code;
      const named = this.codesNamedFor(op, answer.status);
      if (named.length > 0 && typeof code === 'string' && !named.includes(code)) {
        problems.push(`error code "${code}" is not one the contract names for ${answer.status} (${named.join(', ')})`);
      }
    }
    return problems;
  }

  /** A validator for one schema of components, for payloads that arrive outside an answer (event stream messages). */
  schemaProblems(schemaName: string, value: unknown): string[] {
    const key = `#schema ${schemaName}`;
    let validator = this.validators.get(key);
    if (!validator) {
      validator = this.compile({
        '200': { description: schemaName, content: { 'application/json': { schema: { $ref: `#/components/schemas/${schemaName}` } } } },
      });
      this.validators.set(key, validator);
    }
    const result = validator.validateResponse(200, value);
    if (!result) return [];
    return ((result.errors as { path?: string; message: string }[]) ?? []).map(
      (e) => `${schemaName}${e.path ? `/${e.path}` : ''}: ${e.message}`,
    );
  }

  /** An object of components itself, or the one its `$ref` names. */
  private resolve<T>(value: T | OpenAPIV3.ReferenceObject, kind: 'parameters' | 'requestBodies' | 'examples'): T | undefined {
    if (!value || !('$ref' in (value as object))) return value as T;
    const name = (value as OpenAPIV3.ReferenceObject).$ref.replace(`#/components/${kind}/`, '');
    return this.document.components?.[kind]?.[name] as T | undefined;
  }

  private requestExample(body: OpenAPIV3.RequestBodyObject | OpenAPIV3.ReferenceObject | undefined): unknown {
    const json = body && this.resolve<OpenAPIV3.RequestBodyObject>(body, 'requestBodies')?.content['application/json'];
    if (!json) return undefined;
    if (json.example !== undefined) return structuredClone(json.example) as unknown;
    const first = Object.values(json.examples ?? {})[0];
    return structuredClone(first && this.resolve<OpenAPIV3.ExampleObject>(first, 'examples')?.value) as unknown;
  }

  private resolveResponses(responses: OpenAPIV3.ResponsesObject): Record<string, OpenAPIV3.ResponseObject> {
    const out: Record<string, OpenAPIV3.ResponseObject> = {};
    for (const [status, response] of Object.entries(responses)) {
      if ('$ref' in response) {
        const name = response.$ref.replace('#/components/responses/', '');
        out[status] = this.document.components?.responses?.[name] as OpenAPIV3.ResponseObject;
      } else out[status] = response;
    }
    return out;
  }

  private compile(responses: Record<string, OpenAPIV3.ResponseObject>): Validator {
    return new OpenAPIResponseValidator({
      responses: structuredClone(responses) as never,
      components: structuredClone(this.document.components),
      customFormats,
    });
  }

  private envelope(): Validator {
    let validator = this.validators.get('#envelope');
    if (!validator) {
      validator = this.compile({
        default: {
          description: 'any failure',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
        },
      });
      this.validators.set('#envelope', validator);
    }
    return validator;
  }

  private validatorFor(op: Operation): Validator {
    let validator = this.validators.get(op.key);
    if (!validator) {
      validator = this.compile(op.responses);
      this.validators.set(op.key, validator);
    }
    return validator;
  }

  private validateJson(validator: Validator, answer: AnswerToJudge, contentType: string | null): string[] {
    if (!/^application\/json\b/i.test(contentType ?? '')) return [`Content-Type "${contentType ?? ''}" is not application/json`];
    if (answer.body === undefined) return [];
    let body: unknown;
    try {
      body = JSON.parse(answer.body);
    } catch {
      return [`the body is not JSON: ${answer.body.slice(0, 120)}`];
    }
    const result = validator.validateResponse(answer.status, body);
    if (!result) return [];
    const errors = (result.errors as { path?: string; message: string }[]) ?? [];
    return errors.length ? errors.map((e) => `body${e.path ? `/${e.path}` : ''}: ${e.message}`) : [`body: ${result.message}`];
  }
}
