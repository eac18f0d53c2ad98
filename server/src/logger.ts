import { pino, symbols, type DestinationStream, type LogFn, type Logger } from 'pino';

/** Keys whose values are censored one level into a log object, and `authorization` inside a `headers` map. */
const SECRET_KEYS = new Set(['authorization', 'password', 'token', 'invite', 'code', 'secret']);
const CENSORED = '[redacted]';

/**
 * Credentials travel only in headers and bodies, and neither is ever logged; this is a second line
 * of defence should someone log a header map or a body: `{ headers: { authorization } }` and
 * `{ body: { password } }` are censored. It covers what pino's `redact` paths `*.password`, … and
 * `*.headers.authorization` did, without their copy of every line (20 KiB allocated per request
 * line, measured): an object with nothing to censor is passed through as it is. `err` is left to
 * `serializeError`, which writes only the fields it names (pino runs this formatter first).
 */
export function censorSecrets(object: Record<string, unknown>): Record<string, unknown> {
  let out = object;
  for (const key in object) {
    const value = object[key];
    if (key === 'err' || !isMap(value)) continue;
    const censored = censorChild(value);
    if (censored === value) continue;
    if (out === object) out = { ...object };
    out[key] = censored;
  }
  return out;
}

function censorChild(value: Record<string, unknown>): Record<string, unknown> {
  let out = value;
  for (const key in value) {
    const child = value[key];
    let replacement: unknown = child;
    if (SECRET_KEYS.has(key)) replacement = CENSORED;
    else if (key === 'headers' && isMap(child) && 'authorization' in child) replacement = { ...child, authorization: CENSORED };
    if (replacement === child) continue;
    if (out === value) out = { ...value };
    out[key] = replacement;
  }
  return out;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** What the `err` serializer writes of an error. */
export interface LoggedError {
  type: string;
  /** A SQLSTATE, an errno name, a mail server's or an API's error code. */
  code?: string | number;
  /** An SMTP reply code (nodemailer). */
  responseCode?: number;
  /** An HTTP status an API client failed with. */
  statusCode?: number;
  /** The constraint a database error names (a name in the schema, never a value). */
  constraint?: string;
  /** The call frames (the stack without its first line, which repeats the message). */
  stack?: string[];
  /** What the error was caused by, by the same rules. */
  cause?: LoggedError;
}

/** Codes are short words; anything else in a `code` field is not trusted to be one. */
const CODE = /^[\w.-]{1,64}$/;
const STACK_FRAMES = 8;
const CAUSE_DEPTH = 3;

/**
 * The one rule for logging a failure (`logger.warn({ err: error }, 'what failed')`): its type, its
 * codes and its call frames, never its message, nor any field not named here. A message can carry
 * user input or secrets: a driver's holds the SQL and its values, a unique violation's `detail` the
 * duplicate value, an HTTP client's the URL with its credentials. Anything can be thrown, so nothing
 * about `error` is assumed.
 */
export function serializeError(error: unknown, depth = 0): LoggedError {
  if (error === null || typeof error !== 'object') return { type: typeof error };
  const { name, code, responseCode, statusCode, constraint, stack, cause } = error as Record<string, unknown>;
  const logged: LoggedError = { type: typeof name === 'string' ? name : 'Object' };
  if ((typeof code === 'string' && CODE.test(code)) || Number.isInteger(code)) logged.code = code as string | number;
  if (Number.isInteger(responseCode)) logged.responseCode = responseCode as number;
  if (Number.isInteger(statusCode)) logged.statusCode = statusCode as number;
  if (typeof constraint === 'string' && CODE.test(constraint)) logged.constraint = constraint;
  if (typeof stack === 'string') {
    const frames = stack
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('at '));
    if (frames.length > 0) logged.stack = frames.slice(0, STACK_FRAMES);
  }
  if (cause !== undefined && depth < CAUSE_DEPTH) logged.cause = serializeError(cause, depth + 1);
  return logged;
}

/**
 * Standard output for JSON lines: the lines logged within `FLUSH_MS` are written together,
 * synchronously, then (or as soon as `FLUSH_BYTES` are waiting). Under load a write per line (a
 * system call, and when asynchronous a thread-pool round trip and a wake-up of the event loop), or
 * even one per turn of the event loop, which answers only a few requests a turn, cost more CPU than
 * the rest of the request's line (journal entry 25). Lines keep their order and leave within
 * `FLUSH_MS`; those still pending when the process exits, or dies of an uncaught exception, are
 * written first, so a `fatal` line before `process.exit` is never lost. A SIGKILL loses at most
 * the last `FLUSH_MS` of lines.
 */
class StdoutBatched implements DestinationStream {
  private pending = '';
  private readonly out = pino.destination({ dest: 1, sync: true });

  constructor() {
    process.on('exit', () => this.flush());
    process.on('uncaughtExceptionMonitor', () => this.flush());
  }

  write(line: string): void {
    if (this.pending === '') setTimeout(() => this.flush(), FLUSH_MS).unref();
    this.pending += line;
    if (this.pending.length >= FLUSH_BYTES) this.flush();
  }

  /** Writes what is pending now; pino's `logger.flush(callback)` calls it. */
  flush(callback?: (error?: Error) => void): void {
    if (this.pending !== '') {
      const lines = this.pending;
      this.pending = '';
      this.out.write(lines);
    }
    callback?.();
  }
}

const FLUSH_MS = 20;
const FLUSH_BYTES = 16_384;

/**
 * A writer of one kind of `info` line with fields of its own, for the request log, the one line
 * every request writes: the line `logger.info(fields, msg)` writes (level, time, the logger's
 * bindings, the fields, `msg`) for an object holding `names` in that order, made from pieces
 * serialised once (each field's `,"name":` included) and written straight to the logger's
 * destination. Pino's general path (formatters, hooks, its serialisers) cost about a microsecond
 * of a `GET /v1`'s 28 (journal entry 25), serialising the names on every line another 0.4 µs
 * (entry 27). Only for fields that are strings, finite numbers or undefined (left out, as pino
 * leaves them out) and never credentials: the censoring of `censorSecrets` is not applied. A no-op
 * when `info` is not logged.
 */
export function infoLineWriter<Name extends string>(
  logger: Logger,
  msg: string,
  names: readonly Name[],
): (fields: Record<Name, string | number | undefined>) => void {
  if (!logger.isLevelEnabled('info')) return () => {};
  const destination = (logger as unknown as Record<symbol, DestinationStream>)[symbols.streamSym]!;
  const bindings = JSON.stringify(logger.bindings()).slice(1, -1);
  const head = `{"level":${logger.levels.values.info},"time":`;
  const afterTime = bindings === '' ? '' : `,${bindings}`;
  const tail = `,"msg":${JSON.stringify(msg)}}\n`;
  const prefixes = names.map((name) => `,${JSON.stringify(name)}:`);
  return (fields) => {
    let line = head + Date.now() + afterTime;
    for (let i = 0; i < names.length; i++) {
      const value = fields[names[i]!];
      // A finite number is written as JSON writes it.
      if (value !== undefined) line += prefixes[i] + (typeof value === 'number' ? String(value) : JSON.stringify(value));
    }
    destination.write(line + tail);
  };
}

/**
 * Pino takes a line's message from its error's when the call gives none (`logger.warn(error)`,
 * `logger.warn({ err })`); such a line is given a fixed one instead.
 */
function withMessage(this: Logger, args: Parameters<LogFn>, method: LogFn): void {
  const [first] = args;
  if (args.length === 1 && first instanceof Object && (first instanceof Error || 'err' in first)) {
    method.call(this, first, 'error');
    return;
  }
  method.apply(this, args);
}

/** One JSON logger for the process (to stdout unless `destination` is given). */
export function createLogger(level: string, format: 'json' | 'pretty' = 'json', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      // Readable lines for a developer's terminal; JSON (one object a line) for everything else.
      ...(format === 'pretty'
        ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' } } }
        : {}),
      base: { service: 'signalboard' },
      formatters: { log: censorSecrets },
      serializers: { err: serializeError },
      hooks: { logMethod: withMessage },
    },
    destination ?? (format === 'json' ? new StdoutBatched() : undefined),
  );
}

/** The operator commands' logger: to standard error, which leaves standard output to their answer. */
export function operatorLogger(): Logger {
  return createLogger(process.env.LOG_LEVEL || 'warn', 'json', pino.destination(2));
}

export type { Logger };
