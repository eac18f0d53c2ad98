/**
 * The one place that writes answers: successes into `{ success: true, data }`, and every failure,
 * whatever threw it, into `{ success: false, error: { code, message, details? } }` with the status
 * the contract gives that code. Unknown errors become 500 `internal` and are logged without their
 * message (a driver's message can hold SQL with values). On the LogSnag compatibility routes
 * (`x-logsnag` in the contract), a 400 also carries LogSnag's `validation`.
 */
import type { Readable } from 'node:stream';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import { isMissingReference, sqlStateOf } from '../db/errors.js';
import { ApiError, Internal, NotFound, Unavailable } from '../errors.js';
import { PreparedBody, sendPrepared } from './representation.js';
import { clearedSessionCookie, sessionCookie } from './session-cookie.js';

/**
 * What a request's handling ends with, for the envelope to send: a handler's answer (a status with
 * its data, wrapped in the envelope; a body sent as it is; an event stream), or an answer recorded
 * for an Idempotency-Key, replayed. Failures are thrown, never replied.
 */
export interface Reply {
  status: number;
  data?: unknown;
  /**
   * A body sent as it is, outside the envelope: the contract (one object that never changes, so it
   * is serialised, tagged and compressed once), or an answer replayed for an Idempotency-Key.
   */
  raw?: unknown;
  /** A Server-Sent Events stream. */
  stream?: Readable;
  /** The session cookie to set with the answer (a session opened with `cookie: true`), or clear (null: logout). Never replayed. */
  sessionCookie?: SessionCookieChange;
}

/** A new session's token and lifetime for the session cookie, or null to clear the cookie. */
export type SessionCookieChange = { token: string; maxAgeSeconds: number } | null;

declare module 'koa' {
  interface DefaultState {
    /** The request's `Reply`, set by dispatch.ts (and by tests that stand in for a handler). */
    reply?: Reply;
    operationId?: string;
    requestId: string;
    /** The request's operation is a LogSnag compatibility route (`x-logsnag`; set by dispatch.ts). */
    logsnag?: boolean;
  }
}

/**
 * Every form in which a database that is gone, killed, stalled or overwhelmed reaches the envelope,
 * each answered 503 `unavailable` with Retry-After rather than 500: the pool replaces broken
 * connections by itself, so the same request may succeed once the database answers again. A SQLSTATE
 * counts on MikroORM's DriverException or on pg's own DatabaseError (db/raw.ts's statements); knex
 * prefixes a failed query's SQL to the message, so messages are matched anywhere in it.
 */
const DATABASE_UNAVAILABLE: { reason: string; sqlstate?: RegExp; errno?: string[]; message?: RegExp; retryAfter: number }[] = [
  // Connection exceptions, class 08.
  { reason: 'connection failure', sqlstate: /^08/, retryAfter: 5 },
  // 57P01 terminated by an administrator (pg_terminate_backend, a fast shutdown), 57P02 crash, 57P03 starting up, 57P04 database dropped.
  { reason: 'server shutdown', sqlstate: /^57P0[1-4]$/, retryAfter: 5 },
  // query_canceled: the statement ran past statement_timeout (a lock held too long, an overloaded server), or was cancelled.
  { reason: 'statement timeout', sqlstate: /^57014$/, retryAfter: 5 },
  // Insufficient resources: disk full, out of memory, too many connections.
  { reason: 'insufficient resources', sqlstate: /^53/, retryAfter: 5 },
  // A deadlock or a serialization failure that outlasted the domain's retries (domain/transaction.ts).
  { reason: 'collision', sqlstate: /^(?:40P01|40001)$/, retryAfter: 1 },
  // The socket, as Node reports it.
  {
    reason: 'network',
    errno: ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'],
    retryAfter: 5,
  },
  // pg: the server closed the connection ("… unexpectedly"), or connecting timed out ("… due to connection timeout").
  { reason: 'connection lost', message: /Connection terminated/, retryAfter: 5 },
  // pg: the server accepted the connection but did not answer it within DB_CONNECT_TIMEOUT_MS (a stalled server).
  { reason: 'connect timeout', message: /^timeout expired$/, retryAfter: 5 },
  // pg: no answer within query_timeout (db/orm.ts), so the server is stalled or out of reach.
  { reason: 'query timeout', message: /Query read timeout/, retryAfter: 5 },
  // pg: a query on a connection that was lost or ended meanwhile (a rollback after the failure).
  {
    reason: 'connection unusable',
    message: /Client (?:has encountered a connection error|was closed) and is not queryable/,
    retryAfter: 5,
  },
  // knex: a statement for a transaction that had already ended, as one whose connection was lost at its COMMIT or ROLLBACK ends.
  { reason: 'transaction lost', message: /Transaction query already complete/, retryAfter: 5 },
  // knex: no pool connection within DB_ACQUIRE_TIMEOUT_MS (every one busy on a stalled database, or none can be made).
  { reason: 'pool timeout', message: /Knex: Timeout acquiring a connection/, retryAfter: 5 },
];

function databaseUnavailable(error: unknown): (typeof DATABASE_UNAVAILABLE)[number] | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  const sqlstate = sqlStateOf(error);
  return DATABASE_UNAVAILABLE.find(
    (form) =>
      (form.sqlstate && sqlstate !== undefined && form.sqlstate.test(sqlstate)) ||
      (form.errno && typeof code === 'string' && form.errno.includes(code)) ||
      (form.message && form.message.test(error.message)),
  );
}

function toApiError(error: unknown, logger: Logger): ApiError {
  if (error instanceof ApiError) return error;
  // A row the change pointed at was deleted by a concurrent request (an event for a feed being deleted).
  if (isMissingReference(error)) return new NotFound('What this request refers to was deleted meanwhile.');
  const unavailable = databaseUnavailable(error);
  if (unavailable) {
    logger.warn({ err: error, reason: unavailable.reason }, 'database unavailable');
    return new Unavailable('The database could not serve this request now; retry later.', unavailable.retryAfter);
  }
  logger.error({ err: error }, 'unhandled error');
  return new Internal();
}

/** The body of a success answer other than a 204 or a stream: the handler's own (`raw`), or its data in the envelope. */
export function successBody(reply: Reply): unknown {
  return reply.raw !== undefined ? reply.raw : { success: true, data: reply.data };
}

/**
 * The body of a failure answer. On a LogSnag compatibility route (`logsnag`), a 400 also carries
 * `validation: { body: [{ message }] }`, which LogSnag's clients print to their user: one message per
 * detail (where, then what), or the error's own message when it has no details.
 */
export function failureBody(error: ApiError, logsnag = false): unknown {
  const body = {
    success: false,
    error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) },
  };
  if (!logsnag || error.status !== 400) return body;
  const messages = error.details?.length
    ? error.details.map((detail) => ({ message: `${detail.path.replace(/^\/body(?:\/|$)/, '') || 'body'} ${detail.message}` }))
    : [{ message: error.message }];
  return { ...body, validation: { body: messages } };
}

/**
 * Not async: it hands on `next`'s promise with its two continuations (`answer`, `failure`) rather than
 * awaiting it in a promise of its own. Every request pays for each promise the pipeline makes, and
 * dearly once MikroORM's AsyncLocalStorage has installed Node 20's promise hooks for the process.
 */
export function envelope(): Middleware {
  return (ctx, next) =>
    next().then(
      () => answer(ctx),
      (thrown: unknown) => sendJson(ctx, failure(ctx, thrown)),
    );
}

/** Sends the request's reply, if it has one (a static mount answers for itself); a failure to send it is answered as an error. */
function answer(ctx: Context): void {
  let body: unknown;
  try {
    const reply = ctx.state.reply;
    if (!reply) return; // not an API route (static files): nothing to wrap
    ctx.status = reply.status;
    if (reply.sessionCookie !== undefined) ctx.append('Set-Cookie', setCookie(reply.sessionCookie, ctx.secure));
    if (reply.stream) {
      ctx.type = 'text/event-stream';
      ctx.set({ 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
      ctx.body = reply.stream;
      return;
    }
    if (reply.status === 204) {
      ctx.body = null;
      return;
    }
    if (reply.raw !== undefined) {
      sendPrepared(ctx, preparedDocument(reply.raw as object));
      return;
    }
    body = successBody(reply);
  } catch (thrown) {
    body = failure(ctx, thrown);
  }
  sendJson(ctx, body);
}

/** The `Set-Cookie` value of a change to the session cookie, `Secure` over HTTPS. */
function setCookie(change: SessionCookieChange, secure: boolean): string {
  return change ? sessionCookie(change.token, change.maxAgeSeconds, secure) : clearedSessionCookie(secure);
}

/** The failure's status and headers set on the answer; its body returned. */
function failure(ctx: Context, thrown: unknown): unknown {
  const error = toApiError(thrown, ctx.state.log);
  ctx.status = error.status;
  ctx.set(error.headers);
  return failureBody(error, ctx.state.logsnag);
}

/** What Koa's own JSON answers carry (it looks the type up per answer). */
export const JSON_TYPE = 'application/json; charset=utf-8';

const documents = new WeakMap<object, PreparedBody>();

/**
 * `document` serialised, tagged and compressed once per object: the contract is one object for the
 * process's life; a replayed answer is a new object each time, and its entry goes with it.
 */
function preparedDocument(document: object): PreparedBody {
  let prepared = documents.get(document);
  if (!prepared) {
    prepared = new PreparedBody(Buffer.from(JSON.stringify(document)), JSON_TYPE);
    documents.set(document, prepared);
  }
  return prepared;
}

/**
 * Answers `value` as JSON, serialised here: with its Content-Type already set, Koa takes the string
 * as it is, the same bytes and headers as when it serialises an object itself. Outside the
 * envelope's catch, as Koa's serialisation was: a value that cannot be serialised (a bug) fails as
 * it did.
 */
function sendJson(ctx: Context, value: unknown): void {
  ctx.set('Content-Type', JSON_TYPE);
  ctx.body = JSON.stringify(value);
}
