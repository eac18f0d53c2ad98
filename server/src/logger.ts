import { pino, type Logger } from 'pino';

/**
 * One JSON logger for the process. Credentials travel only in headers and bodies, and neither is
 * ever logged; the redaction below is a second line of defence should someone log a header map.
 */
export function createLogger(level: string, format: 'json' | 'pretty' = 'json'): Logger {
  return pino({
    level,
    // Readable lines for a developer's terminal; JSON (one object a line) for everything else.
    ...(format === 'pretty' ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' } } } : {}),
    base: { service: 'signalboard' },
    redact: {
      paths: ['*.authorization', '*.headers.authorization', '*.password', '*.token', '*.invite', '*.code', '*.secret'],
      censor: '[redacted]',
    },
  });
}

export type { Logger };
