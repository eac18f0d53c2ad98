/**
 * The contract's two request conventions (spec/http-rules.tsp) are declared on exactly the
 * operations they cover, so that a new operation cannot silently miss one:
 * - idempotent writes: every POST and PATCH that needs a credential but API token creation (whose
 *   answer, a token shown once, cannot be given again), and no other operation, takes
 *   `Idempotency-Key`, documents 409 and 422, and may answer `Idempotent-Replayed` on success;
 * - conditional reads: every GET with a JSON body, and no other operation, takes `If-None-Match`,
 *   documents 304, and sends `ETag` on its 200; the event stream does none of that.
 */
import { expect } from 'chai';
import type { OpenAPIV3 } from 'openapi-types';
import generated from '../../spec/generated/openapi.json' with { type: 'json' };

const document = generated as unknown as OpenAPIV3.Document;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

interface Op {
  key: string;
  method: string;
  operation: OpenAPIV3.OperationObject;
}

const operations: Op[] = Object.entries(document.paths).flatMap(([path, item]) =>
  METHODS.flatMap((method) => (item?.[method] ? [{ key: `${method.toUpperCase()} ${path}`, method, operation: item[method] }] : [])),
);

function headerParameters(operation: OpenAPIV3.OperationObject): string[] {
  return (operation.parameters ?? []).flatMap((p) => {
    const parameter = '$ref' in p ? document.components!.parameters![p.$ref.split('/').pop()!]! : p;
    return 'in' in parameter && parameter.in === 'header' ? [parameter.name] : [];
  });
}

const response = (op: Op, status: string) => op.operation.responses[status] as OpenAPIV3.ResponseObject | undefined;
const keys = (ops: Op[]) => ops.map((op) => op.key).sort();
const needsCredential = (op: Op) => !(op.operation.security ?? document.security ?? []).some((r) => Object.keys(r).length === 0);

describe("the contract's request conventions", () => {
  it('Idempotency-Key: on every POST and PATCH that needs a credential but API token creation, with 409, 422 and Idempotent-Replayed', () => {
    const writes = operations.filter(
      (op) => (op.method === 'post' || op.method === 'patch') && needsCredential(op) && op.operation.operationId !== 'createApiToken',
    );
    expect(writes).to.have.length(22);
    expect(keys(operations.filter((op) => headerParameters(op.operation).includes('Idempotency-Key')))).to.deep.equal(keys(writes));
    for (const op of writes) {
      const success = Object.keys(op.operation.responses).find((status) => status.startsWith('2'))!;
      expect(response(op, success)?.headers, op.key).to.have.property('Idempotent-Replayed');
      expect(response(op, '409'), `${op.key} 409`).to.not.equal(undefined);
      expect(response(op, '422'), `${op.key} 422`).to.not.equal(undefined);
    }
    expect(keys(operations.filter((op) => response(op, '422')))).to.deep.equal(keys(writes));
  });

  it('If-None-Match: on every GET with a JSON body but the event stream, with 304 and ETag', () => {
    const reads = operations.filter((op) => op.method === 'get' && response(op, '200')?.content?.['application/json']);
    expect(keys(reads)).not.to.include('GET /v1/projects/{namespace}/events/stream');
    expect(keys(operations.filter((op) => headerParameters(op.operation).includes('If-None-Match')))).to.deep.equal(keys(reads));
    expect(keys(operations.filter((op) => response(op, '304')))).to.deep.equal(keys(reads));
    for (const op of reads) {
      expect(response(op, '200')?.headers, op.key).to.have.property('ETag');
      expect(response(op, '304')?.content, `${op.key} 304 has no body`).to.equal(undefined);
    }
  });
});
