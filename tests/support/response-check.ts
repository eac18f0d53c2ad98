/**
 * The independent contract check: every answer the suite gets from the service is validated against
 * spec/generated/openapi.json by a third-party validator (openapi-response-validator, its own Ajv
 * and its own OpenAPI 3 → JSON Schema translation), not by openapi-backend, which the server itself
 * validates requests with. Only `Contract.match` of the server is used, to find the operation.
 *
 * `installResponseCheck()` wraps `globalThis.fetch`: answers from a local service (127.0.0.1,
 * localhost or [::1], a path under /v1, /healthz or /readyz, and the service's own X-Request-Id
 * header, or the run's base URL) are checked in the background on a clone of the response, so the
 * caller's body is neither consumed nor delayed. Only `application/json` bodies are cloned and read;
 * a `text/event-stream` answer is checked for its status and content type alone. Raw `node:http`
 * requests are out of its reach; the fuzz suite calls `checkAnswer()` itself.
 *
 * What is checked, per answer: the status is documented for the operation (an unknown path must be
 * 404, a known path with an undocumented method 405, each in the error envelope); the content type
 * is the documented one; the JSON body matches the documented schema; a documented required header
 * is present; a response documented without content has no body.
 */
import OpenAPIResponseValidatorModule from 'openapi-response-validator';
import type { OpenAPIV3 } from 'openapi-types';
import { ApiError } from '../../server/src/errors.js';
import { Contract, contractDocument } from '../../server/src/http/contract.js';

// openapi-response-validator is CommonJS with an `exports.default`: under ESM that is `.default`.
type ValidatorClass = typeof import('openapi-response-validator').default;
const OpenAPIResponseValidator = ((OpenAPIResponseValidatorModule as unknown as { default?: ValidatorClass }).default ??
  OpenAPIResponseValidatorModule) as ValidatorClass;
type Validator = InstanceType<ValidatorClass>;

export interface Violation {
  method: string;
  path: string;
  /** The operation's path template, or the path when no operation matches. */
  route: string;
  status: number;
  error: string;
  note?: string;
}

export interface Answer {
  method: string;
  /** Path and query as sent. */
  url: string;
  status: number;
  headers: { get(name: string): string | null };
  /** The body as text; undefined when it was not read (streams). */
  body: string | undefined;
  /** What was sent, for the report (the fuzzer describes its case here). */
  note?: string;
}

/** Formats the contract uses, checked here by independent definitions (not ajv-formats). */
const RFC3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const customFormats = {
  'date-time': (value: unknown) => typeof value !== 'string' || (RFC3339.test(value) && !Number.isNaN(Date.parse(value))),
  uuid: (value: unknown) => typeof value !== 'string' || UUID.test(value),
  email: (value: unknown) => typeof value !== 'string' || /^[^\s@]+@[^\s@]+$/.test(value),
  uri: (value: unknown) => typeof value !== 'string' || URL.canParse(value),
  int32: () => true,
  int64: () => true,
  double: () => true,
  float: () => true,
};

type ResponsesObject = Record<string, OpenAPIV3.ResponseObject>;

export class ResponseChecker {
  private readonly validators = new Map<string, Validator>();
  private readonly envelopeValidator: Validator;

  private constructor(
    private readonly contract: Contract,
    private readonly document: OpenAPIV3.Document,
  ) {
    this.envelopeValidator = this.compile({
      default: { description: 'any failure', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } },
    });
  }

  static async load(): Promise<ResponseChecker> {
    const document = structuredClone(contractDocument) as unknown as OpenAPIV3.Document;
    return new ResponseChecker(await Contract.load(), document);
  }

  private compile(responses: ResponsesObject): Validator {
    return new OpenAPIResponseValidator({
      responses: structuredClone(responses) as never,
      components: structuredClone(this.document.components) as never,
      customFormats,
    });
  }

  private responsesOf(path: string, method: string): ResponsesObject {
    const item = this.document.paths[path] as Record<string, OpenAPIV3.OperationObject>;
    return item[method.toLowerCase()]!.responses as ResponsesObject;
  }

  private validatorFor(path: string, method: string): Validator {
    const key = `${method} ${path}`;
    let validator = this.validators.get(key);
    if (!validator) {
      validator = this.compile(this.responsesOf(path, method));
      this.validators.set(key, validator);
    }
    return validator;
  }

  routeOf(method: string, url: string): string {
    const path = url.split('?')[0]!;
    try {
      return this.contract.match(method, path).op.path;
    } catch {
      return path.length > 80 ? `${path.slice(0, 80)}…` : path;
    }
  }

  /** Whether the body of this answer is worth reading: JSON only, never a stream, the CDN or the contract itself. */
  static wantsBody(method: string, url: string, contentType: string | null): boolean {
    const path = url.split('?')[0]!.replace(/(.)\/+$/, '$1');
    if (method === 'HEAD' || path.startsWith('/cdn/') || path === '/v1/openapi.json') return false;
    return /^application\/json\b/i.test(contentType ?? '');
  }

  /** The problems of one answer; empty when it matches the contract. */
  check(answer: Answer): string[] {
    const method = answer.method.toUpperCase();
    const path = answer.url.split('?')[0]!;
    const problems: string[] = [];
    if (path.startsWith('/cdn/')) return problems;
    const contentType = answer.headers.get('content-type');
    const readBody = ResponseChecker.wantsBody(method, answer.url, contentType) && answer.body !== undefined;

    let template: string;
    let opMethod: string;
    try {
      const { op } = this.contract.match(method, path);
      template = op.path;
      opMethod = op.method;
    } catch (error) {
      // No operation: an unknown path (404) or a method the path does not have (405). A CORS
      // preflight answered before routing (204, no body) is the one other outcome.
      if (method === 'OPTIONS' && answer.status === 204) return problems;
      if (!(error instanceof ApiError)) return [`routing failed: ${(error as Error).message}`];
      const allowed = [error.status, 500, 503];
      if (!allowed.includes(answer.status)) problems.push(`no operation matches: expected ${error.status} (${error.code}), got ${answer.status}`);
      if (method !== 'HEAD') problems.push(...this.validateJson(this.envelopeValidator, answer, readBody));
      return problems;
    }

    const responses = this.responsesOf(template, opMethod);
    const documented = responses[String(answer.status)] ?? responses[`${String(answer.status)[0]}XX`] ?? responses.default;
    if (!documented) {
      problems.push(`status ${answer.status} is not documented for ${opMethod} ${template} (documented: ${Object.keys(responses).join(', ')})`);
      if (answer.status >= 400 && method !== 'HEAD') problems.push(...this.validateJson(this.envelopeValidator, answer, readBody));
      return problems;
    }
    for (const [name, header] of Object.entries(documented.headers ?? {})) {
      if ((header as OpenAPIV3.HeaderObject).required && answer.headers.get(name) === null) problems.push(`required header ${name} is missing`);
    }
    if (method === 'HEAD') return problems;
    const mediaTypes = Object.keys(documented.content ?? {});
    if (mediaTypes.length === 0) {
      if (answer.body !== undefined && answer.body !== '') problems.push(`a body was sent where the contract documents none: ${answer.body.slice(0, 120)}`);
      return problems;
    }
    const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
    if (!mediaTypes.includes(type)) {
      problems.push(`content type "${contentType}" is not the documented ${mediaTypes.join(' or ')}`);
      return problems;
    }
    if (type !== 'application/json' || template === '/v1/openapi.json') return problems;
    problems.push(...this.validateJson(this.validatorFor(template, opMethod), answer, readBody));
    return problems;
  }

  private validateJson(validator: Validator, answer: Answer, readBody: boolean): string[] {
    if (!readBody) {
      return /^application\/json\b/i.test(answer.headers.get('content-type') ?? '') ? [] : [`content type "${answer.headers.get('content-type')}" is not application/json`];
    }
    let body: unknown;
    try {
      body = JSON.parse(answer.body!);
    } catch {
      return [`the body is not JSON: ${answer.body!.slice(0, 120)}`];
    }
    const result = validator.validateResponse(answer.status, body);
    if (!result) return [];
    const errors = (result.errors as { path?: string; message: string }[]) ?? [];
    return errors.map((e) => `body${e.path ? `/${e.path}` : ''}: ${e.message}`);
  }
}

// ----- The suite-wide wrapper around fetch -----

let checker: ResponseChecker | undefined;
let originalFetch: typeof fetch | undefined;
const pending = new Set<Promise<void>>();
const violations: Violation[] = [];
let checked = 0;
let knownOrigins: () => string[] = () => [];

/** Counts an answer and keeps its problems (used by the fetch wrapper and by the fuzz suite). */
export function recordAnswer(answer: Answer): string[] {
  if (!checker) return [];
  checked += 1;
  const problems = checker.check(answer);
  if (problems.length && answer.headers.get('x-request-id') === null) problems.push('no X-Request-Id: answered below the service (by Node\'s HTTP parser?)');
  const method = answer.method.toUpperCase();
  const route = problems.length ? checker.routeOf(method, answer.url) : '';
  for (const error of problems) violations.push({ method, path: answer.url.slice(0, 300), route, status: answer.status, error, ...(answer.note ? { note: answer.note } : {}) });
  return problems;
}

export function responseChecker(): ResponseChecker | undefined {
  return checker;
}

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const SERVICE_PATH = /^\/(v1|healthz|readyz)/;

function requestOf(input: Parameters<typeof fetch>[0], init: Parameters<typeof fetch>[1]): { method: string; url: URL } | undefined {
  try {
    if (input instanceof Request) return { method: (init?.method ?? input.method).toUpperCase(), url: new URL(input.url) };
    return { method: (init?.method ?? 'GET').toUpperCase(), url: new URL(String(input)) };
  } catch {
    return undefined;
  }
}

function originsNow(): string[] {
  try {
    return knownOrigins();
  } catch {
    return [];
  }
}

/** Wraps globalThis.fetch; `origins` names the servers always checked (the run's own). */
export async function installResponseCheck(origins: () => string[] = () => []): Promise<void> {
  if (originalFetch) return;
  checker = await ResponseChecker.load();
  knownOrigins = origins;
  const original = globalThis.fetch;
  originalFetch = original;
  globalThis.fetch = async function checkedFetch(input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]): Promise<Response> {
    const response = await original(input, init);
    const request = requestOf(input, init);
    if (!request || !LOCAL_HOSTS.has(request.url.hostname === '::1' ? '[::1]' : request.url.hostname) || !SERVICE_PATH.test(request.url.pathname)) return response;
    const ours = originsNow().includes(request.url.origin) || response.headers.has('x-request-id');
    if (!ours) return response;
    const url = request.url.pathname + request.url.search;
    const base = { method: request.method, url, status: response.status, headers: response.headers };
    if (ResponseChecker.wantsBody(request.method, url, response.headers.get('content-type')) && response.body) {
      // A clone, read in the background: the caller gets the response at once and reads it as it likes.
      const copy = response.clone();
      const job = copy
        .text()
        .then((body) => void recordAnswer({ ...base, body }))
        .catch((error: unknown) => {
          // The caller aborted or the connection broke: not the contract's business.
          if ((error as Error).name !== 'AbortError') recordAnswer({ ...base, body: undefined });
        })
        .finally(() => pending.delete(job));
      pending.add(job);
    } else {
      recordAnswer({ ...base, body: response.body ? undefined : '' });
    }
    return response;
  } as typeof fetch;
}

/** Violations grouped by operation, status and problem, each with a count and its first example. */
export function summarizeViolations(): string[] {
  const groups = new Map<string, { v: Violation; n: number }>();
  for (const v of violations) {
    // Body problems differ by array index only: /items/3/actor and /items/0/actor are one kind.
    const key = `${v.method} ${v.route} ${v.status} ${v.error.replace(/\/\d+\//g, '/N/')}`;
    const entry = groups.get(key);
    if (entry) entry.n += 1;
    else groups.set(key, { v, n: 1 });
  }
  return [...groups.values()].slice(0, 100).map(({ v, n }) =>
    `  ${v.method} ${v.route} → ${v.status}: ${v.error} (×${n})\n      e.g. ${v.method} ${v.path}${v.note ? `\n      sent: ${v.note}` : ''}`,
  );
}

/** Restores fetch, waits for the checks in flight, and throws listing every violation. */
export async function assertResponsesMatchContract(): Promise<void> {
  if (originalFetch) {
    globalThis.fetch = originalFetch;
    originalFetch = undefined;
  }
  await Promise.race([Promise.allSettled([...pending]), new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
  console.log(`\n  Contract check (openapi-response-validator): ${checked} answers checked, ${violations.length} violation(s)\n`);
  if (violations.length === 0) return;
  throw new Error(`${violations.length} answer(s) do not match spec/generated/openapi.json, in ${summarizeViolations().length} kinds:\n${summarizeViolations().join('\n')}`);
}
