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
import type { Device } from '../domain/credentials.js';
import type { Caller } from '../domain/scope.js';
import { claimLeaseMs } from '../domain/idempotency.js';
import { Internal } from '../errors.js';
import type { Services } from '../services.js';
import { authorize, identify, presented, type Presented } from './auth.js';
import { readJsonBody, readRawBody } from './body.js';
import type { Contract } from './contract.js';
import type { ContractOperation } from './contract-operation.js';
import type { Reply } from './envelope.js';
import type { HandlerContext, Handlers, OperationId } from './handler-types.js';
import { IDEMPOTENCY_KEY, onceForKey } from './idempotency.js';
import { clientAddress, type RateLimits } from './rate-limit.js';
import { invalidRequest } from './validation-errors.js';

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
function callHandler<K extends OperationId>(handlers: Handlers, operationId: K, input: HandlerContext<K>): Promise<Reply> {
  return handlers[operationId](input);
}

export function dispatch({ contract, orm, rateLimits }: Pipeline, handlers: Handlers, services: Services): Middleware {
  const leaseMs = claimLeaseMs(services.config.database);
  const setup: Setup = { contract, orm, rateLimits, handlers, services, leaseMs };
  // A refusal made before anything is awaited (404, 405, a public route's 400) is thrown here, not
  // returned: Koa's compose, which calls every middleware, turns it into the rejection the envelope answers.
  return (ctx) => new Dispatch(setup, ctx).identify();
}

/** What every request's dispatch shares, set up once. */
interface Setup extends Pipeline {
  handlers: Handlers;
  services: Services;
  leaseMs: number;
}

/**
 * One request's way through the steps above, one method a step. A step that has something to wait
 * for hands its promise to the next step (`then`); one that has not calls the next step at once,
 * so a request pays only for the promises its own steps make (GET /v1: its handler's).
 */
class Dispatch {
  readonly #setup: Setup;
  readonly #ctx: Context;
  readonly #op: ContractOperation;
  readonly #operationId: OperationId;
  readonly #params: Record<string, string>;
  readonly #authorization: string | undefined;
  #credential: Presented | undefined;
  #forked: EntityManager | undefined;

  constructor(setup: Setup, ctx: Context) {
    const { op, params } = setup.contract.match(ctx.method, ctx.path);
    const operationId = op.operationId;
    ctx.state.operationId = operationId;
    if (op.logsnag) ctx.state.logsnag = true;
    // handlers/index.ts has a handler for every operation of the generated contract the service loads.
    if (!hasHandler(setup.handlers, operationId)) throw new Internal();
    this.#setup = setup;
    this.#ctx = ctx;
    this.#op = op;
    this.#operationId = operationId;
    this.#params = params;
    this.#authorization = ctx.get('Authorization') || undefined;
  }

  /** The request's entity manager, forked when something first uses it. */
  readonly em = (): EntityManager => (this.#forked ??= unitOfWork(this.#setup.orm));

  /** Resolves the credential (the `Authorization` header, else the session cookie), if the operation needs one. */
  identify(): Promise<void> {
    const credential = this.#op.isPublic ? undefined : presented(this.#ctx, this.#authorization);
    this.#credential = credential;
    const identifying = credential && identify(this.#op, credential, this.em);
    return identifying ? identifying.then((resolved) => this.count(resolved)) : this.count(undefined);
  }

  /** Counts the request against its rate limit, by `resolved` if there is one. */
  private count(resolved: Caller | undefined): Promise<void> {
    const counting = this.#setup.rateLimits.consume(this.#operationId, this.#ctx, resolved);
    return counting ? counting.then(() => this.read(resolved)) : this.read(resolved);
  }

  /** Refuses a request without the credential it needs, then reads its body, if the pipeline reads it. */
  private read(resolved: Caller | undefined): Promise<void> {
    const caller = this.#credential && authorize(this.#op, resolved, this.#credential);
    const op = this.#op;
    if (op.hasBody && !op.rawBody) return readJsonBody(this.#ctx).then((body) => this.run(caller, body));
    return this.run(caller, undefined);
  }

  /** Validates the request and calls its handler, once per `Idempotency-Key`; the reply goes to `ctx.state.reply`. */
  private run(caller: Caller | undefined, body: unknown): Promise<void> {
    const { contract, handlers, services, leaseMs } = this.#setup;
    const ctx = this.#ctx;
    const op = this.#op;
    const operationId = this.#operationId;
    const checked = contract.validate(op, { headers: ctx.headers, query: ctx.query, body }, this.#params);
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
    const input = new HandlerInput(parts, ctx, op, contract, {
      authorization: this.#authorization,
      caller,
      viaCookie: this.#credential?.via === 'cookie',
      em: this.em,
      services,
    });
    const work = () => callHandler(handlers, operationId, input);
    const key = op.takesIdempotencyKey ? ctx.get(IDEMPOTENCY_KEY) : '';
    const replying =
      key && caller
        ? onceForKey(
            {
              ctx,
              em: this.em(),
              scope: { userId: caller.userId, key, namespace: this.#params.namespace },
              body,
              secretFields: op.secretFields,
              leaseMs,
              limitedCredential: caller.grant.projectIds ? caller.credentialId : undefined,
            },
            work,
          )
        : work();
    return replying.then((reply) => {
      ctx.state.reply = reply;
    });
  }
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
  readonly viaCookie: boolean;
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
    request: {
      authorization: string | undefined;
      caller: Caller | undefined;
      viaCookie: boolean;
      em: () => EntityManager;
      services: Services;
    },
  ) {
    this.params = parts.params;
    this.headers = parts.headers;
    this.query = parts.query;
    this.body = parts.body;
    this.readRawBody = op.rawBody ? (limitBytes: number) => readRawBody(ctx, limitBytes) : notRawBody;
    this.validateBody = op.rawBody ? (value: unknown) => contract.validateBody(op, value) : notRawBody;
    this.authorization = request.authorization;
    this.viaCookie = request.viaCookie;
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
