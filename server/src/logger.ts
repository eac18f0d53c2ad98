import { pino, type DestinationStream, type Logger } from 'pino';

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
 * Standard output for JSON lines: the lines logged during one turn of the event loop are written
 * together, synchronously, when the turn's callbacks have run (`setImmediate`). Under load a turn
 * answers many requests, and a write per line (a system call, and when asynchronous a thread-pool
 * round trip and a wake-up of the event loop) cost more CPU than the rest of the request's line.
 * Lines keep their order and leave at the end of their turn at the latest; those still pending when
 * the process exits, or dies of an uncaught exception, are written first, so a `fatal` line before
 * `process.exit` is never lost.
 */
class StdoutByTurn implements DestinationStream {
  private pending = '';
  private readonly out = pino.destination({ dest: 1, sync: true });

  constructor() {
    process.on('exit', () => this.flush());
    process.on('uncaughtExceptionMonitor', () => this.flush());
  }

  write(line: string): void {
    if (this.pending === '') setImmediate(() => this.flush());
    this.pending += line;
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
    destination ?? (format === 'json' ? new StdoutByTurn() : undefined),
  );
}

export type { Logger };
