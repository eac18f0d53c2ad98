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
    destination,
  );
}

export type { Logger };
