/**
 * The contract's operations as the fuzzer sees them: each with its body schema and its query and
 * header parameters, references resolved, taken from the contract model that the conformance
 * package's judge also reads (spec/generated/openapi.json).
 */
import type { OpenAPIV3 } from 'openapi-types';
import type { ContractModel } from '../../../tools/src/conformance/contract.js';

export interface FuzzOperation {
  operationId: string;
  method: string;
  path: string;
  operation: OpenAPIV3.OperationObject;
  bodySchema: OpenAPIV3.SchemaObject | OpenAPIV3.ReferenceObject | undefined;
  query: OpenAPIV3.ParameterObject[];
  headers: OpenAPIV3.ParameterObject[];
}

/** The contract's operations with what the generator needs: the body schema and the query and header parameters. */
export function operationsOf(contract: ContractModel): FuzzOperation[] {
  const document = contract.document;
  const deref = <T>(value: T | OpenAPIV3.ReferenceObject): T => {
    if (value && typeof value === 'object' && '$ref' in value) {
      const parts = value.$ref
        .replace(/^#\//, '')
        .split('/')
        .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
      return parts.reduce<any>((node, key) => node[key], document) as T;
    }
    return value;
  };
  return contract.operations.map((op) => {
    const operation = (document.paths[op.path] as Record<string, OpenAPIV3.OperationObject>)[op.method.toLowerCase()]!;
    const parameters = (operation.parameters ?? []).map((p) => deref<OpenAPIV3.ParameterObject>(p));
    const body = operation.requestBody ? deref<OpenAPIV3.RequestBodyObject>(operation.requestBody) : undefined;
    return {
      operationId: op.operationId,
      method: op.method,
      path: op.path,
      operation,
      bodySchema: body?.content['application/json']?.schema,
      query: parameters.filter((p) => p.in === 'query'),
      headers: parameters.filter((p) => p.in === 'header'),
    };
  });
}
