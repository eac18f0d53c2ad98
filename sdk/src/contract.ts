/**
 * The types of each operation's arguments and answer, read from the contract's generated types
 * (spec/generated/openapi.ts) by operationId: the SDK writes no request or answer type of its own.
 */
import type { operations } from '../../spec/generated/openapi.js';

export type OperationId = keyof operations;

type Parameters<O extends OperationId> = operations[O]['parameters'];

/** True when `A` and `B` are the same type, neither wider nor narrower; false otherwise. */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only when `T` is true: `Expect<Equal<A, B>>` fails to compile where A and B differ. */
export type Expect<T extends true> = T;

/** The type of path parameter `K` of operation `O`. */
export type PathParam<O extends OperationId, K extends string> =
  Parameters<O> extends { path: infer P } ? (K extends keyof P ? P[K] : never) : never;

/** The query parameters of operation `O`, as one object. */
export type Query<O extends OperationId> = NonNullable<Parameters<O>['query']>;

/** The JSON body of operation `O`. */
export type Body<O extends OperationId> = operations[O] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;

type Responses<O extends OperationId> = operations[O]['responses'];
type SuccessStatus = 200 | 201 | 202 | 204;
type SuccessBody<O extends OperationId> = {
  [S in keyof Responses<O> & SuccessStatus]: Responses<O>[S] extends { content: { 'application/json': infer B } } ? B : undefined;
}[keyof Responses<O> & SuccessStatus];

/** What a call of `O` answers: the envelope's `data`, the body itself when it is no envelope, undefined for 204. */
export type Data<O extends OperationId> = SuccessBody<O> extends { success: true; data: infer D } ? D : SuccessBody<O>;

/** One page of a list, as every list operation answers it. */
export interface Page<Item = unknown> {
  items: Item[];
  next_cursor: string | null;
}
