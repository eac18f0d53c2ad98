/**
 * One API request, in order: route it against the contract (404/405), count it against its rate
 * limit (429), authenticate (401/403),
 * read the body (413/415/400), validate it against the contract (400), and call the operation's
 * handler. Every path reaches here unless a static mount before it answered, so an unknown path
 * is a 404 in the envelope. Authentication comes before the body so that an anonymous caller cannot make the
 * server read a large body.
 */
import type { Middleware } from 'koa';
import { Internal, InvalidRequest } from '../errors.js';
import type { Services } from '../services.js';
import { authenticate } from './auth.js';
import { readJsonBody } from './body.js';
import type { Contract } from './contract.js';
import type { HandlerContext, Handlers, OperationId } from './handler-types.js';
import type { Caller } from '../domain/credentials.js';

export function dispatch(contract: Contract, handlers: Handlers, services: Services): Middleware {
  return async (ctx) => {
    const { op, params } = contract.match(ctx.method, ctx.path);
    ctx.state.operationId = op.operationId;
    await services.rateLimits.consume(op.operationId, ctx);

    const em = services.db.orm.em.fork();
    const authorization = ctx.get('Authorization') || undefined;
    const caller = await authenticate(em, op, authorization);
    const handler = handlers[op.operationId as OperationId] as unknown as (c: HandlerContext<OperationId>) => Promise<{ status: number }>;
    const body = op.hasBody ? await readJsonBody(ctx) : undefined;

    const checked = contract.validate(
      op,
      { headers: ctx.headers, query: ctx.query, body },
      params,
    );
    if (!checked.ok) {
      const [first] = checked.details;
      const more = checked.details.length > 1 ? ` (and ${checked.details.length - 1} more, see details)` : '';
      throw new InvalidRequest(`Invalid request: ${first?.path} ${first?.message}${more}.`, checked.details);
    }

    const input = new HandlerInput({
      params: checked.params,
      headers: Object.fromEntries(op.headerNames.map((name) => [name, ctx.get(name) || undefined])),
      query: checked.query,
      body,
      rawBody: op.hasBody ? ctx.request.rawBody : undefined,
      authorization,
      device: { userAgent: ctx.get('User-Agent') || undefined, ip: ctx.ip || undefined },
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
