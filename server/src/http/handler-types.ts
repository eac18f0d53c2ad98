/**
 * Handler types derived from the generated contract types: a handler's input and every answer it
 * may give are the operation's own, so a handler that drifts from the contract does not compile.
 */
import type { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { operations } from '../../../spec/generated/openapi.js';
import type { Device } from '../domain/credentials.js';
import type { Caller } from '../domain/scope.js';
import type { Services } from '../services.js';
import type { SessionCookieChange } from './envelope.js';

export type OperationId = keyof operations;
type Op<K extends OperationId> = operations[K];
type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type Defined<T> = [NonNullable<T>] extends [never] ? Record<string, never> : NonNullable<T>;

export type PathParams<K extends OperationId> = Defined<Op<K>['parameters']['path']>;
export type HeaderParams<K extends OperationId> = Defined<Op<K>['parameters']['header']>;
export type QueryParams<K extends OperationId> = Defined<Op<K>['parameters']['query']>;
export type RequestBody<K extends OperationId> = Op<K> extends { requestBody: infer R } ? Json<R> : undefined;

type Responses<K extends OperationId> = Op<K>['responses'];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 202 | 204>;
type Content<T> = T extends { content: infer C } ? C : never;
/** What a handler returns for success status `S` of operation `K`. */
type ResultFor<K extends OperationId, S extends keyof Responses<K>> = S extends 204
  ? { status: 204 }
  : Content<Responses<K>[S]> extends { 'text/event-stream': unknown }
    ? { status: S; stream: Readable }
    : Json<Responses<K>[S]> extends { success: true; data: infer D }
      ? { status: S; data: D }
      : { status: S; raw: Json<Responses<K>[S]> };

/**
 * What a handler returns: a documented success status with its payload (the envelope is added for
 * it), and the session cookie to set or clear with it, if any (envelope.ts writes it).
 */
export type Result<K extends OperationId> = { [S in SuccessStatus<K>]: ResultFor<K, S> }[SuccessStatus<K>] & {
  sessionCookie?: SessionCookieChange;
};

export interface HandlerContext<K extends OperationId> {
  params: PathParams<K>;
  /** The request headers the contract declares for this operation, by their contract names. */
  headers: HeaderParams<K>;
  query: QueryParams<K>;
  body: RequestBody<K>;
  /**
   * `x-raw-body` operations only (`body` is then undefined): reads the body's bytes as received, at
   * most `limitBytes` (413 past it, 415 unless JSON), for a check that must come before any parse
   * (the Stripe webhook's signature). Not called, the body is never read.
   */
  readRawBody(limitBytes: number): Promise<Buffer>;
  /** `x-raw-body` operations only: holds the body the handler parsed to the contract, as the pipeline does any other (400). */
  validateBody(body: unknown): void;
  /** The authenticated caller; reading it on a public operation is a programming error. */
  readonly caller: Caller;
  /** The raw `Authorization` header, for the public operations that must look at it (sign-up). */
  authorization: string | undefined;
  /** The caller's session came in the session cookie rather than the `Authorization` header (http/session-cookie.ts). */
  viaCookie: boolean;
  device: Device;
  em: EntityManager;
  services: Services;
}

export type Handler<K extends OperationId> = (ctx: HandlerContext<K>) => Promise<Result<K>>;

/** One handler per operation of the contract: adding an operation without one does not compile. */
export type Handlers = { [K in OperationId]: Handler<K> };
