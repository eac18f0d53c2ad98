/**
 * The one place that writes answers: successes into `{ success: true, data }`, and every failure,
 * whatever threw it, into `{ success: false, error: { code, message, details? } }` with the status
 * the contract gives that code. Unknown errors become 500 `internal` and are logged without their
 * message (a driver's message can hold SQL with values).
 */
import type { Readable } from 'node:stream';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { ConnectionException, DriverException, ForeignKeyConstraintViolationException } from '@mikro-orm/core';
import { ApiError, Internal, NotFound, Unavailable } from '../errors.js';

export interface Outcome {
  status: number;
  data?: unknown;
  raw?: unknown;
  /** A Server-Sent Events stream. */
  stream?: Readable;
}

declare module 'koa' {
  interface DefaultState {
    outcome?: Outcome;
    operationId?: string;
    requestId: string;
  }
}

/** SQLSTATE classes that mean the database is not there (connection failure, shutdown, timeout). */
const UNAVAILABLE_SQLSTATE = /^(08|57P0|53)/;
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE']);

function isDatabaseDown(error: unknown): boolean {
  if (error instanceof ConnectionException) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNAVAILABLE_ERRNO.has(code) || (error instanceof DriverException && UNAVAILABLE_SQLSTATE.test(code)))) return true;
  return error instanceof Error && /Connection terminated|timeout exceeded when trying to connect|Knex: Timeout acquiring a connection/.test(error.message);
}

function toApiError(error: unknown, logger: Logger): ApiError {
  if (error instanceof ApiError) return error;
  // A row the change pointed at was deleted by a concurrent request (an event for a feed being deleted).
  if (error instanceof ForeignKeyConstraintViolationException) return new NotFound('What this request refers to was deleted meanwhile.');
  if (isDatabaseDown(error)) {
    logger.warn({ err: { type: (error as Error).name, code: (error as { code?: unknown }).code } }, 'database unavailable');
    return new Unavailable();
  }
  const { name, code } = (error ?? {}) as { name?: string; code?: unknown };
  const stack = error instanceof Error ? error.stack?.split('\n').filter((line) => line.trim().startsWith('at ')).slice(0, 8) : undefined;
  logger.error({ err: { type: name, code, stack } }, 'unhandled error');
  return new Internal();
}

export function envelope(): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      const outcome = ctx.state.outcome;
      if (!outcome) return; // not an API route (static files): nothing to wrap
      ctx.status = outcome.status;
      if (outcome.stream) {
        ctx.type = 'text/event-stream';
        ctx.set({ 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
        ctx.body = outcome.stream;
      } else if (outcome.status === 204) ctx.body = null;
      else ctx.body = outcome.raw !== undefined ? outcome.raw : { success: true, data: outcome.data };
    } catch (thrown) {
      const error = toApiError(thrown, ctx.state.log ?? ctx.app.context.logger);
      ctx.status = error.status;
      ctx.set(error.headers);
      ctx.body = {
        success: false,
        error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) },
      };
    }
  };
}
