/**
 * One load run with autocannon. Latencies are taken from autocannon's per-response timing (float
 * milliseconds) rather than its histogram, which rounds to whole milliseconds.
 */
import autocannon from 'autocannon';

export interface LoadRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadResult {
  requests: number;
  /** Requests answered 2xx per second. */
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
}

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * Drives `url` with `connections` connections for `seconds`; `next` is asked for each request (so
 * callers can rotate tokens, projects and bodies).
 */
export async function load(
  url: string,
  options: { connections: number; seconds: number; next: () => LoadRequest; onStart?: () => void },
): Promise<LoadResult> {
  const latencies: number[] = [];
  let non2xx = 0;
  let finish!: (value: autocannon.Result) => void;
  let fail!: (error: unknown) => void;
  const done = new Promise<autocannon.Result>((resolve, reject) => ((finish = resolve), (fail = reject)));
  const instance = autocannon(
    {
      url,
      connections: options.connections,
      duration: options.seconds,
      // Each connection asks `next` for every request it sends.
      requests: [
        {
          setupRequest: (request) => {
            const r = options.next();
            return {
              ...request,
              method: r.method,
              path: r.path,
              headers: { ...r.headers, ...(r.body ? { 'content-type': 'application/json' } : {}) },
              body: r.body,
            };
          },
        },
      ],
    },
    (error, result) => (error ? fail(error) : finish(result)),
  );
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
    else non2xx += 1;
  });
  options.onStart?.();
  const result = await done;
  const sorted = Float64Array.from(latencies).sort();
  return {
    requests: sorted.length + non2xx,
    rps: round(sorted.length / result.duration, 0),
    p50: round(percentile(sorted, 50)),
    p90: round(percentile(sorted, 90)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.at(-1) ?? NaN),
    non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
  };
}

/** Checks one request by hand before loading it, so a bench never measures a stream of 4xx answers. */
export async function probe(url: string, request: LoadRequest, expected: number): Promise<unknown> {
  const response = await fetch(url + request.path, {
    method: request.method,
    headers: { ...request.headers, ...(request.body ? { 'content-type': 'application/json' } : {}) },
    body: request.body ?? null,
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`${request.method} ${request.path}: ${response.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}
