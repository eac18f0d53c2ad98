/**
 * One API request, in order: route it against the contract (404/405); resolve its credential, if
 * the operation needs one; count it against its rate limit (429), by that credential when it
 * resolved and by the client address when not; refuse it without a valid credential (401/403);
 * read the body (413/415/400); validate the request against the contract (400); and call the
 * operation's handler, once per `Idempotency-Key` when the request has one (http/idempotency.ts).
 * Every path reaches here unless a static mount before it answered, so an unknown path is a 404 in
 * the envelope. The credential is checked before the body is read, so
 * that an anonymous caller cannot make the server read a large body; an `x-raw-body` operation's
 * body is read by its handler, if at all.
 *
 * Every request pays for what this does, so it does only what the request needs: the entity
 * manager is forked when something first uses it (a route that never reaches the database never
 * forks one), and a step with nothing to wait for is not awaited (each `await` costs promises,
 * which the async-context hooks MikroORM's transactions install make dearer for the whole process).
 */
import type { Context, Middleware } from 'koa';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { unitOfWork } from '../db/orm.js';
import type { Caller, Device } from '../domain/credentials.js';
import { claimLeaseMs } from '../domain/idempotency.js';
import { Internal } from '../errors.js';
import type { Services } from '../services.js';
import { authorize, identify } from './auth.js';
import { readJsonBody, readRawBody } from './body.js';
import { invalidRequest, type Contract, type ContractOperation } from './contract.js';
import type { Outcome } from './envelope.js';
import type { HandlerContext, Handlers, OperationId } from './handler-types.js';
import { IDEMPOTENCY_KEY, onceForKey } from './idempotency.js';
import { clientAddress, type RateLimits } from './rate-limit.js';

/** What the pipeline itself works with, which no handler reaches. */
export interface Pipeline {
  contract: Contract;
  /** Each request that uses the database gets its own fork of this ORM's EntityManager. */
  orm: MikroORM;
  rateLimits: RateLimits;
}

/** The request's parts the contract's validator checks against the operation's schema. */
type CheckedParts<K extends OperationId> = Pick<HandlerContext<K>, 'params' | 'headers' | 'query' | 'body'>;

/** What `readRawBody` and `validateBody` are on an operation that is not `x-raw-body`: calling them is a programming error. */
function notRawBody(): never {
  throw new Internal();
}

/** Whether the contract's `operationId` is one of the generated types' operations, with its handler. */
function hasHandler(handlers: Handlers, operationId: string): operationId is OperationId {
  return Object.hasOwn(handlers, operationId);
}

/** Calls operation `operationId`'s handler with that operation's input: the types pair them here. */
function callHandler<K extends OperationId>(handlers: Handlers, operationId: K, input: HandlerContext<K>): Promise<Outcome> {
  return handlers[operationId](input);
}

export function dispatch({ contract, orm, rateLimits }: Pipeline, handlers: Handlers, services: Services): Middleware {
  const leaseMs = claimLeaseMs(services.config.database);
  return async (ctx) => {
    const { op, params } = contract.match(ctx.method, ctx.path);
    const operationId = op.operationId;
    ctx.state.operationId = operationId;
    // handlers/index.ts has a handler for every operation of the generated contract the service loads.
    if (!hasHandler(handlers, operationId)) throw new Internal();
    let forked: EntityManager | undefined;
    const em = () => (forked ??= unitOfWork(orm));
    const authorization = ctx.get('Authorization') || undefined;
    const identifying = identify(op, authorization, em);
    const resolved = identifying && (await identifying);
    const counting = rateLimits.consume(operationId, ctx, resolved);
    if (counting) await counting;
    const caller = authorize(op, resolved);
    const body = op.hasBody && !op.rawBody ? await readJsonBody(ctx) : undefined;

    const checked = contract.validate(op, { headers: ctx.headers, query: ctx.query, body }, params);
    if (!checked.ok) throw invalidRequest(checked.details);
    // The one boundary between the contract's run-time check and its compile-time types: `validate`
    // has just held the path, query, declared headers and body to this operation's schema (coercing
    // and defaulting them), which is what the generated types describe.
    const parts = {
      params: checked.params,
      headers: Object.fromEntries(op.headerNames.map((name) => [name, ctx.get(name) || undefined])),
      query: checked.query,
      body,
    } as CheckedParts<typeof operationId>;
    const input = new HandlerInput(parts, ctx, op, contract, { authorization, caller, em, services });
    const work = () => callHandler(handlers, operationId, input);
    const key = op.takesIdempotencyKey ? ctx.get(IDEMPOTENCY_KEY) : '';
    ctx.state.outcome = await (key && caller
      ? onceForKey({ ctx, em: em(), scope: { userId: caller.userId, key }, body, leaseMs }, work)
      : work());
  };
}

/**
 * What a handler receives: its operation's `HandlerContext`, field by field. `caller`, `em` and
 * `device` are getters on this prototype, not in a literal built per request, which V8 would keep
 * reachable with the whole request (see `ResolvedCaller` in domain/credentials.ts).
 */
class HandlerInput<K extends OperationId> implements HandlerContext<K> {
  readonly params: HandlerContext<K>['params'];
  readonly headers: HandlerContext<K>['headers'];
  readonly query: HandlerContext<K>['query'];
  readonly body: HandlerContext<K>['body'];
  readonly readRawBody: HandlerContext<K>['readRawBody'];
  readonly validateBody: HandlerContext<K>['validateBody'];
  readonly authorization: string | undefined;
  readonly services: Services;
  readonly #caller: Caller | undefined;
  readonly #em: () => EntityManager;
  readonly #ctx: Context;
  #device: Device | undefined;

  constructor(
    parts: CheckedParts<K>,
    ctx: Context,
    op: ContractOperation,
    contract: Contract,
    request: { authorization: string | undefined; caller: Caller | undefined; em: () => EntityManager; services: Services },
  ) {
    this.params = parts.params;
    this.headers = parts.headers;
    this.query = parts.query;
    this.body = parts.body;
    this.readRawBody = op.rawBody ? (limitBytes: number) => readRawBody(ctx, limitBytes) : notRawBody;
    this.validateBody = op.rawBody ? (value: unknown) => contract.validateBody(op, value) : notRawBody;
    this.authorization = request.authorization;
    this.services = request.services;
    this.#caller = request.caller;
    this.#em = request.em;
    this.#ctx = ctx;
    // Node keeps a socket's peer address once it has been read: `device`, read later, gets the same
    // address even if the client has gone by then.
    void ctx.socket.remoteAddress;
  }

  /** The caller's user agent and address, worked out when a handler first asks (only sign-up and login do). */
  get device(): Device {
    return (this.#device ??= { userAgent: this.#ctx.get('User-Agent') || undefined, ip: clientAddress(this.#ctx) || undefined });
  }

  /** The request's entity manager, forked on first use. */
  get em(): EntityManager {
    return this.#em();
  }

  /** Reading it on a public operation is a programming error (the types say so too). */
  get caller(): Caller {
    if (!this.#caller) throw new Internal();
    return this.#caller;
  }
}
