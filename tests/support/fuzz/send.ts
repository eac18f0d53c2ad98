/**
 * Sending one case: over a fresh `node:http` connection, with the headers given as a list and the
 * body framed as the case says, so that duplicated headers, `..` and `%00` in paths, and any method
 * reach the server as written; no answer within 10 s is a failure. And reading the answer's error
 * message, which must name no internals (a stack frame, an SQL statement).
 */
import http from 'node:http';
import type { FuzzRequest } from './requests.js';

export interface FuzzAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string | undefined;
  ms: number;
  stream: boolean;
}

const ANSWER_TIMEOUT_MS = 10_000;
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export function send(baseUrl: string, request: FuzzRequest, resolve: (s: string) => string): Promise<FuzzAnswer> {
  const url = new URL(baseUrl);
  // With headers given as a list Node adds no Host, and an HTTP/1.1 request without one is
  // refused by Node's own parser (a bare 400) before the service sees it.
  const headers: string[] = ['Host', url.host];
  for (const [name, value] of request.headers) headers.push(name, resolve(value));
  const body = request.body === undefined ? undefined : Buffer.from(resolve(request.body), request.rawBytes ? 'latin1' : 'utf8');
  // Framing is always explicit: Node adds no chunked encoding by itself to GET, HEAD or DELETE.
  if (body) headers.push(...(request.chunked ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(body.length)]));
  const started = performance.now();
  return new Promise((done, fail) => {
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: request.method,
      path: resolve(request.path),
      headers,
      agent: false,
      setHost: false,
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`));
    }, ANSWER_TIMEOUT_MS);
    req.on('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    req.on('response', (res) => {
      const stream = /^text\/event-stream/i.test(res.headers['content-type'] ?? '');
      if (stream || request.method === 'HEAD') {
        clearTimeout(timer);
        res.destroy();
        req.destroy();
        done({ status: res.statusCode!, headers: res.headers, body: undefined, ms: performance.now() - started, stream });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      });
      res.on('end', () => {
        clearTimeout(timer);
        done({
          status: res.statusCode!,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          ms: performance.now() - started,
          stream,
        });
      });
      res.on('error', (error) => {
        clearTimeout(timer);
        fail(error);
      });
    });
    if (body) {
      if (request.chunked) {
        const middle = Math.floor(body.length / 2);
        req.write(body.subarray(0, middle));
        req.end(body.subarray(middle));
      } else req.end(body);
    } else req.end();
  });
}

/** An error message is for the caller: a stack frame or an SQL statement in it leaks the service's internals. */
export function leakedInternals(answer: FuzzAnswer): string[] {
  let message: unknown;
  try {
    message = (JSON.parse(answer.body ?? '') as { error?: { message?: unknown } } | null)?.error?.message;
  } catch {
    return [];
  }
  return typeof message === 'string' && /\bat .+:\d+:\d+\)|\bselect\b.+\bfrom\b|\binsert into\b|stack/i.test(message)
    ? [`error.message leaks internals: ${message}`]
    : [];
}
