/**
 * One API request, in order: route it against the contract (404/405); resolve its credential, if
 * the operation needs one; count it against its rate limit (429), by that credential when it
 * resolved and by the client address when not; refuse it without a valid credential (401/403);
 * read the body (413/415/400); validate the request against the contract (400); and call the
 * operation's handler. Every path reaches here unless a static mount before it answered, so an
 * unknown path is a 404 in the envelope. The credential is checked before the body is read, so
 * that an anonymous caller cannot make the server read a large body; an `x-raw-body` operation's
 * body is read by its handler, if at all.
 */
import type { Middleware } from 'koa';
import { Internal } from '../errors.js';
import type { Services } from '../services.js';
import { authorize, identify } from './auth.js';
import { readJsonBody, readRawBody } from './body.js';
import { invalidRequest, type Contract } from './contract.js';
import type { HandlerContext, Handlers, OperationId } from './handler-types.js';
import { clientAddress } from './rate-limit.js';
import type { Caller } from '../domain/credentials.js';

/** What `readRawBody` and `validateBody` are on an operation that is not `x-raw-body`: calling them is a programming error. */
function notRawBody(): never {
  throw new Internal();
}

export function dispatch(contract: Contract, handlers: Handlers, services: Services): Middleware {
  return async (ctx) => {
    const { op, params } = contract.match(ctx.method, ctx.path);
    ctx.state.operationId = op.operationId;
    const em = services.db.orm.em.fork();
    const authorization = ctx.get('Authorization') || undefined;
    const resolved = await identify(em, op, authorization);
    await services.rateLimits.consume(op.operationId, ctx, resolved);
    const caller = authorize(op, resolved);
    const handler = handlers[op.operationId as OperationId] as unknown as (c: HandlerContext<OperationId>) => Promise<{ status: number }>;
    const body = op.hasBody && !op.rawBody ? await readJsonBody(ctx) : undefined;

    const checked = contract.validate(op, { headers: ctx.headers, query: ctx.query, body }, params);
    if (!checked.ok) throw invalidRequest(checked.details);

    const input = new HandlerInput({
      params: checked.params,
      headers: Object.fromEntries(op.headerNames.map((name) => [name, ctx.get(name) || undefined])),
      query: checked.query,
      body,
      readRawBody: op.rawBody ? (limitBytes: number) => readRawBody(ctx, limitBytes) : notRawBody,
      validateBody: op.rawBody ? (value: unknown) => contract.validateBody(op, value) : notRawBody,
      authorization,
      device: { userAgent: ctx.get('User-Agent') || undefined, ip: clientAddress(ctx) || undefined },
      em,
      services,
    }, caller);
    ctx.state.outcome = await handler(input as unknown as HandlerContext<OperationId>);
  };
}

/**
 * What a handler receives, seen by it as its operation's `HandlerContext`. `caller` is a getter on
 * this prototype, not in a literal built per request, which V8 would keep reachable with the whole
 * request (see `ResolvedCaller` in domain/credentials.ts).
 */
class HandlerInput {
  constructor(
    fields: object,
    private readonly authenticated: Caller | undefined,
  ) {
    Object.assign(this, fields);
  }

  /** Reading it on a public operation is a programming error (the types say so too). */
  get caller(): Caller {
    if (!this.authenticated) throw new Internal();
    return this.authenticated;
  }
}
