/**
 * Request ids and access logs. The id comes from `X-Request-Id` when the caller sent a well-formed
 * one (so a trace can cross services), otherwise a new UUID; it is echoed on every answer. The log
 * line names the method, the path without its query, the operation and the status: never a header
 * or a body, so no credential, password or invite code can reach it.
 */
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { infoLineWriter } from '../logger.js';
import type { Reply } from './envelope.js';
import type { PreparedBody } from './representation.js';

const WELL_FORMED_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * `ctx.state`, set by `requestLog`, the app's first middleware, so every later one has it. `log` is
 * the request's logger, with its id; it is made when first asked for (an error to log), since most
 * requests log only their request line, which needs no logger of its own.
 */
export class RequestState {
  reply?: Reply;
  operationId?: string;
  prepared?: PreparedBody;
  #log: Logger | undefined;

  constructor(
    readonly requestId: string,
    private readonly logger: Logger,
  ) {}

  get log(): Logger {
    return (this.#log ??= this.logger.child({ requestId: this.requestId }));
  }
}

declare module 'koa' {
  interface DefaultState {
    log: Logger;
  }
}

/** The request line's fields, in the order `logger.info` would write the line's object. */
export const LINE_FIELDS = ['requestId', 'method', 'path', 'operationId', 'status', 'ms'] as const;

/**
 * Not async: the line is written by continuations on `next`'s promise, which it hands on, rather
 * than in a promise of its own (see envelope.ts: every promise costs every request).
 */
export function requestLog(logger: Logger): Middleware {
  const info = infoLineWriter(logger, 'request', LINE_FIELDS);
  return (ctx, next) => {
    const incoming = ctx.get('X-Request-Id');
    const requestId = WELL_FORMED_ID.test(incoming) ? incoming : randomUUID();
    ctx.state = new RequestState(requestId, logger);
    ctx.res.setHeader('X-Request-Id', requestId);
    const started = performance.now();
    const done = () => {
      // `requestId` first: the line is what `ctx.state.log` would write, whose binding comes first.
      const line = {
        requestId,
        method: ctx.method,
        path: ctx.path,
        operationId: ctx.state.operationId,
        status: ctx.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
      };
      if (ctx.status >= 500) logger.warn(line, 'request');
      else info(line);
    };
    return next().then(done, (error: unknown) => {
      done();
      throw error;
    });
  };
}
