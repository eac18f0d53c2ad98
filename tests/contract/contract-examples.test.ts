/**
 * The contract's examples (`@opExample` in spec/*.tsp) cannot rot: every operation shows an answer
 * for its success status (none for a 204, which has no body) and a request when it takes a JSON
 * body, and every example in spec/generated/openapi.json, request or answer, in `example` or
 * `examples`, is valid against the schema it sits beside.
 *
 * Validation is Ajv 8 with ajv-formats, as the service's own, and stricter than the service on two
 * points an example must also meet: a `uuid` is a UUID v7 (the contract's ids are), and an object
 * schema that lists its properties is closed, so an example cannot keep a field the contract has
 * dropped. The TypeSpec compiler already checks each example against the operation's types; this
 * adds what it does not check (formats, patterns, bounds).
 */
import { expect } from 'chai';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { OpenAPIV3 } from 'openapi-types';
import generated from '../../spec/generated/openapi.json' with { type: 'json' };

// ajv-formats is CommonJS: under ESM its function is the default export's `default`.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => void;

const document = generated as unknown as OpenAPIV3.Document;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };
const DOCUMENT_ID = 'openapi.json';

interface Example {
  /** `POST /v1/projects request` or `POST /v1/projects 201 application/json`, and the example's name. */
  where: string;
  schema: OpenAPIV3.SchemaObject | OpenAPIV3.ReferenceObject;
  value: unknown;
}

interface OperationExamples {
  key: string;
  successStatus: string;
  takesJson: boolean;
  requestExamples: number;
  successExamples: number;
}

/** A copy of `value` in which every object schema that lists properties and says nothing of others is closed. */
function closed<T>(value: T): T {
  if (Array.isArray(value)) return value.map(closed) as T;
  if (typeof value !== 'object' || value === null) return value;
  const copy = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, closed(v)])) as Record<string, unknown>;
  if (typeof copy.properties === 'object' && !('additionalProperties' in copy)) copy.additionalProperties = false;
  return copy as T;
}

/** `#/components/…` references, made absolute so that a schema lifted out of the document still resolves. */
function anchored<T>(value: T): T {
  if (Array.isArray(value)) return value.map(anchored) as T;
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? `${DOCUMENT_ID}${v}` : anchored(v)]),
  ) as T;
}

function newAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addFormat('uuid', UUID_V7);
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= INT32.min && n <= INT32.max });
  ajv.addFormat('double', { type: 'number', validate: () => true });
  // The components, under an id of their own, closed; the schemas beside the examples refer into them.
  ajv.addSchema({ components: closed(document.components) }, DOCUMENT_ID);
  return ajv;
}

function examplesOf(where: string, media: OpenAPIV3.MediaTypeObject): Example[] {
  const found: Example[] = [];
  if (!media.schema) return found;
  if (media.example !== undefined) found.push({ where, schema: media.schema, value: media.example });
  for (const [name, example] of Object.entries(media.examples ?? {})) {
    expect(example, `${where} "${name}": examples are given inline`).not.to.have.property('$ref');
    found.push({ where: `${where} "${name}"`, schema: media.schema, value: (example as OpenAPIV3.ExampleObject).value });
  }
  return found;
}

/** Every example of the document, and for each operation how many examples show its request and its success. */
function collect(): { examples: Example[]; operations: OperationExamples[] } {
  const examples: Example[] = [];
  const operations: OperationExamples[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of METHODS) {
      const operation = item?.[method];
      if (!operation) continue;
      const key = `${method.toUpperCase()} ${path}`;
      const body = operation.requestBody as OpenAPIV3.RequestBodyObject | undefined;
      const json = body?.content['application/json'];
      const requestExamples = json ? examplesOf(`${key} request`, json) : [];
      examples.push(...requestExamples);
      const successStatus = Object.keys(operation.responses).find((status) => /^2\d\d$/.test(status))!;
      let successExamples = 0;
      for (const [status, response] of Object.entries(operation.responses)) {
        for (const [type, media] of Object.entries((response as OpenAPIV3.ResponseObject).content ?? {})) {
          const found = examplesOf(`${key} ${status} ${type}`, media);
          if (status === successStatus) successExamples += found.length;
          examples.push(...found);
        }
      }
      operations.push({ key, successStatus, takesJson: json !== undefined, requestExamples: requestExamples.length, successExamples });
    }
  }
  return { examples, operations };
}

describe("the contract's examples", () => {
  const ajv = newAjv();
  const { examples, operations } = collect();
  const validators = new Map<object, ValidateFunction>();
  const problemsOf = (example: Example): string[] => {
    let validate = validators.get(example.schema);
    if (!validate) validators.set(example.schema, (validate = ajv.compile(anchored(closed(example.schema)))));
    if (validate(example.value)) return [];
    return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
  };

  it('show an answer for the success status of every operation that has a body to show', () => {
    const missing = operations.filter((op) => op.successStatus !== '204' && op.successExamples === 0).map((op) => op.key);
    expect(missing).to.deep.equal([]);
    expect(operations.length).to.be.greaterThan(30);
  });

  it('show a request for every operation that takes a JSON body', () => {
    const missing = operations.filter((op) => op.takesJson && op.requestExamples === 0).map((op) => op.key);
    expect(missing).to.deep.equal([]);
  });

  it('are each valid against the schema beside it', () => {
    expect(examples.length).to.be.greaterThan(60);
    const invalid = examples.flatMap((example) => problemsOf(example).map((problem) => `${example.where}: ${problem}`));
    expect(invalid).to.deep.equal([]);
  });

  it('are judged strictly enough to catch an example gone stale', () => {
    const created = examples.find((example) => example.where.startsWith('POST /v1/projects 201'))!;
    const project = (created.value as { data: Record<string, unknown> }).data;
    const stale = (data: Record<string, unknown>): Example => ({ ...created, value: { success: true, data } });
    expect(problemsOf(created)).to.deep.equal([]);
    expect(problemsOf(stale({ ...project, archived: false }))).to.deep.equal(['/data must NOT have additional properties']);
    expect(problemsOf(stale({ ...project, id: '01890a5d-ac96-4e4b-9c27-5c4ec7f6a1b2' }))).to.deep.equal([
      '/data/id must match format "uuid"',
    ]);
    expect(problemsOf(stale({ ...project, namespace: 'Acme Web' }))).to.have.length(1);
    const { tier: _, ...withoutTier } = project;
    expect(problemsOf(stale(withoutTier))).to.deep.equal(["/data must have required property 'tier'"]);
  });
});
