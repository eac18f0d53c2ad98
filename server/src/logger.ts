import { pino, symbols, type DestinationStream, type Logger } from 'pino';

/** Keys whose values are censored one level into a log object, and `authorization` inside a `headers` map. */
const SECRET_KEYS = new Set(['authorization', 'password', 'token', 'invite', 'code', 'secret']);
const CENSORED = '[redacted]';

/**
 * Credentials travel only in headers and bodies, and neither is ever logged; this is a second line
 * of defence should someone log a header map or a body: `{ headers: { authorization } }` and
 * `{ body: { password } }` are censored. It covers what pino's `redact` paths `*.password`, … and
 * `*.headers.authorization` did, without their copy of every line (20 KiB allocated per request
 * line, measured): an object with nothing to censor is passed through as it is.
 */
export function censorSecrets(object: Record<string, unknown>): Record<string, unknown> {
  let out = object;
  for (const key in object) {
    const value = object[key];
    if (!isMap(value)) continue;
    const censored = censorChild(value, key === 'err');
    if (censored === value) continue;
    if (out === object) out = { ...object };
    out[key] = censored;
  }
  return out;
}

/** An error's `code` (a SQLSTATE, an errno) is kept: it is what an operator needs, and never a credential. */
function censorChild(value: Record<string, unknown>, isError: boolean): Record<string, unknown> {
  let out = value;
  for (const key in value) {
    const child = value[key];
    let replacement: unknown = child;
    if (SECRET_KEYS.has(key) && !(isError && key === 'code')) replacement = CENSORED;
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
    },
    destination ?? (format === 'json' ? new StdoutBatched() : undefined),
  );
}

export type { Logger };
