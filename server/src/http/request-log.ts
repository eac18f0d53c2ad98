/**
 * Request ids and access logs. The id comes from `X-Request-Id` when the caller sent a well-formed
 * one (so a trace can cross services), otherwise a new UUID; it is echoed on every answer. The log
 * line names the method, the path without its query, the operation and the status: never a header
 * or a body, so no credential, password or invite code can reach it.
 */
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';

declare module 'koa' {
  interface DefaultState {
    /** The request's logger, with its id: set by `requestLog`, the app's first middleware, so every later one has it. */
    log: Logger;
  }
}

const WELL_FORMED_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestLog(logger: Logger): Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get('X-Request-Id');
    const requestId = WELL_FORMED_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.state.log = logger.child({ requestId });
    ctx.set('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const line = {
        method: ctx.method,
        path: ctx.path,
        operationId: ctx.state.operationId,
        status: ctx.status,
        ms: Math.round(ms * 10) / 10,
      };
      if (ctx.status >= 500) ctx.state.log.warn(line, 'request');
      else ctx.state.log.info(line, 'request');
    }
  };
}
