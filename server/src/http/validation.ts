/**
 * Validation of a routed request against its operation in the contract: the hostile-input screen
 * first (hostile-input.ts), then the operation's JSON Schemas, compiled by openapi-backend with ajv
 * and called on the parts the pipeline already has. openapi-backend's own `validateRequest` would
 * parse the request again (path template, query, headers, cookies) on every call; here its compiled
 * validators get what the router and the body reader produced.
 *
 * The work and the answer stay bounded by the request, not by the number of its faults: a request
 * of up to DETAILED_VALUES values is checked for all its problems, a larger one only up to its
 * first (60,000 bad tag values would otherwise be 60,000+ error objects); the problems become the
 * envelope's `details` in validation-errors.ts.
 */
import { OpenAPIBackend, OpenAPIValidator, type AjvCustomizer, type Document } from 'openapi-backend';
import addFormatsModule from 'ajv-formats';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { ErrorDetail } from '../errors.js';
import type { ContractOperation } from './contract-operation.js';
import { isStorableDateTime, screen } from './hostile-input.js';
import { detailsOf, invalidRequest } from './validation-errors.js';

// ajv-formats is CommonJS: under ESM its function is the default export's `default`.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (
  ajv: unknown,
  formats: string[],
) => void;

/** Requests of up to this many values get every problem listed; larger ones their first. */
const DETAILED_VALUES = 256;
/** Of ajv's errors, the most read before de-duplication: enough for MAX_DETAILS distinct ones in practice. */
const MAX_ERRORS_READ = 100;

/** useDefaults fills parameter defaults from the contract (`limit` = 50), so no handler repeats them. */
const AJV_OPTIONS = { allErrors: true, strict: false, useDefaults: true } as const;

/** `email` and `uuid` as ajv-formats checks them; `date-time` as the service can store it. */
const customizeAjv: AjvCustomizer = (ajv) => {
  addFormats(ajv, ['email', 'uuid']);
  ajv.addFormat('date-time', { type: 'string', validate: isStorableDateTime });
  return ajv;
};

/** openapi-backend over `document` (a copy: it dereferences in place), compiling validators as the service checks requests. */
export function openapiBackend(document: Document): OpenAPIBackend {
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

/** The request's parts as the pipeline read them. */
export interface ValidationInput {
  headers: Record<string, string | string[] | undefined>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
}

/** A request that passed, with its query and path parameters coerced and defaulted; or its problems. */
export type Validated =
  { ok: true; query: Record<string, unknown>; params: Record<string, unknown> } | { ok: false; details: ErrorDetail[] };

export class RequestValidation {
  /** The same validators compiled to stop at their first error, for requests too large to list all of theirs. */
  private readonly firstProblem: OpenAPIValidator;

  /** `api`: initialised (its document loaded and dereferenced); request validators compile on each operation's first request. */
  constructor(private readonly api: OpenAPIBackend) {
    this.firstProblem = new OpenAPIValidator({
      definition: api.definition,
      router: api.router,
      lazyCompileValidators: true,
      coerceTypes: true,
      ajvOpts: { ...AJV_OPTIONS, allErrors: false },
      customizeAjv,
    });
  }

  /**
   * Validates a request: first the screen, then the operation's validators. Returns the problems
   * (at most MAX_DETAILS), and on success the query and path parameters with their types coerced
   * (`limit=10` becomes a number). The body of an `x-raw-body` operation is not part of the request
   * here: its handler checks it with `validateBody` once it has parsed it.
   */
  validate(op: ContractOperation, input: ValidationInput, params: Record<string, string>): Validated {
    const body = op.rawBody ? undefined : input.body;
    const screened = screen([
      ['path', params],
      ['query', input.query],
      ['headers', input.headers],
      ['body', body],
    ]);
    if (screened.problems.length > 0) return { ok: false, details: screened.problems };
    // Coercion and defaults change these copies in place.
    const query = { ...input.query };
    for (const name of op.listQuery) if (typeof query[name] === 'string') query[name] = [query[name]];
    const parameters = { path: { ...params }, query, header: { ...input.headers }, cookie: {}, requestBody: body };
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
    return errors.length === 0 ? [] : detailsOf(errors);
  }
}

/** Whether a compiled validator is the one for the body (openapi-backend compiles one for the body, one for the parameters). */
function checksBody(validator: ValidateFunction): boolean {
  return (validator.schema as { properties?: Record<string, unknown> }).properties?.requestBody !== undefined;
}
