/**
 * The suite's only way to the deployment: HTTP through fetch. Every answer is judged against the
 * contract as it arrives and kept (method, path, operation, status, problems) for the coverage and
 * the reports. Never kept: request bodies (they hold passwords and invite codes), tokens, headers.
 *
 * Requests keep to the deployment's rate limits (pacing.ts): one its `RateLimit-*` headers say has
 * no room left waits until the window resets. Should a 429 come anyway (no such headers, or someone
 * else spending the same count), one the case did not ask for is judged like any answer, then the
 * request is sent again after `Retry-After` seconds, so a run is slower but still complete.
 */
import type { ContractModel, RouteResult } from './contract.js';
import { Pacer, type Counted, type PacedWait } from './pacing.js';

export interface Request {
  method: string;
  /** Path and query, e.g. `/v1/projects?limit=1`. */
  path: string;
  /** A token sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** The raw `Authorization` header (wins over `token`). */
  authorization?: string;
  /** A JSON body, sent with `Content-Type: application/json`. */
  json?: unknown;
  /** A body sent as given, with this content type (none if undefined). */
  raw?: { body: string | Uint8Array; contentType?: string };
  headers?: Record<string, string>;
  /** The case provokes 429 itself: no waiting and retrying. */
  expect429?: boolean;
}

export interface Exchange {
  /** Sequence number in the run. */
  seq: number;
  method: string;
  /** Path and query as sent. */
  url: string;
  /** The operation reached (`METHOD /template`), or undefined for a path no operation has. */
  operation: string | undefined;
  operationId: string | undefined;
  status: number;
  headers: Headers;
  /** The body text (empty for 204; undefined for event streams, which are read by the case). */
  text: string | undefined;
  /** The parsed JSON body, when there is one. */
  json: any;
  ms: number;
  /** Where the answer differs from the contract; empty when it conforms. */
  problems: string[];
  /** Which case sent it (index into the case list; -1 for cleanup). */
  caseIndex: number;
  /** A short description of what was sent, secrets left out. */
  sent: string;
}

export interface StreamExchange extends Exchange {
  /** The open event stream (only when the status is 200 and the type an event stream). */
  response: Response;
  abort: () => void;
}

export class TransportError extends Error {}

const SECRET_KEYS = /^(password|invite|token)$/i;

/** What was sent, for the reports: JSON with secret fields masked and long strings cut. */
export function describeBody(request: Request): string {
  if (request.json !== undefined) {
    const text = JSON.stringify(request.json, (key, value: unknown) => {
      if (SECRET_KEYS.test(key) && typeof value === 'string') return '***';
      if (typeof value === 'string' && value.length > 80) return `${value.slice(0, 40)}… (${value.length} chars)`;
      return value;
    });
    return text.length > 300 ? `${text.slice(0, 300)}…` : text;
  }
  if (request.raw) {
    const size = typeof request.raw.body === 'string' ? Buffer.byteLength(request.raw.body) : request.raw.body.byteLength;
    return `${size} bytes as ${request.raw.contentType ?? '(no Content-Type)'}`;
  }
  return '';
}

/**
 * What fetch needs to send a request: its credential (`Authorization`, the raw header winning over
 * `token`), its body (JSON, or raw bytes with their content type) and any other header. The tests of
 * the repository send their requests with it too.
 */
export function requestInit(request: Request, init: { userAgent?: string; signal?: AbortSignal } = {}): RequestInit {
  const headers: Record<string, string> = { ...(init.userAgent ? { 'User-Agent': init.userAgent } : {}), ...(request.headers ?? {}) };
  if (request.authorization !== undefined) headers.Authorization = request.authorization;
  else if (request.token) headers.Authorization = `Bearer ${request.token}`;
  let body: string | Uint8Array | undefined;
  if (request.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(request.json);
  } else if (request.raw) {
    if (request.raw.contentType !== undefined) headers['Content-Type'] = request.raw.contentType;
    body = request.raw.body;
  }
  return {
    method: request.method,
    headers,
    body: body as BodyInit | undefined,
    redirect: 'manual',
    ...(init.signal ? { signal: init.signal } : {}),
  };
}

/** A body as JSON; undefined when it is empty or not JSON. */
export function parseJson(text: string | undefined): any {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function describeAuth(request: Request): string {
  if (request.authorization !== undefined) return `Authorization: ${request.authorization.replace(/(\S+\s+)(\S{4})\S+/, '$1$2…')}`;
  if (request.token) return `Bearer ${request.token.slice(0, 4)}…`;
  return 'no credential';
}

export interface ClientOptions {
  baseUrl: string;
  contract: ContractModel;
  timeoutMs: number;
  /** Called before the suite waits for a rate limit. */
  onWait?: (wait: PacedWait) => void;
  /** Longest wait for a rate limit (seconds); past it the request goes, or its 429 is returned as it is. */
  maxWaitSeconds?: number;
  userAgent: string;
}

export class Client {
  readonly exchanges: Exchange[] = [];
  caseIndex = -1;
  /** 429 answers to requests that did not ask for one. */
  refusals = 0;
  readonly pacer: Pacer;

  constructor(private readonly options: ClientOptions) {
    this.pacer = new Pacer({ maxWaitMs: (options.maxWaitSeconds ?? 65) * 1000, ...(options.onWait ? { onWait: options.onWait } : {}) });
  }

  get baseUrl(): string {
    return this.options.baseUrl;
  }

  routeOf(method: string, path: string): RouteResult {
    return this.options.contract.route(method, path.split('?')[0]!);
  }

  /** What the pacer counts the request by: its operation, and the token it carries. */
  private counted(request: Request): Counted {
    const routed = this.routeOf(request.method, request.path);
    const op = routed.kind === 'operation' ? routed.op : undefined;
    const credential = request.authorization !== undefined ? request.authorization.trim().split(/\s+/).pop() : request.token;
    return { operationId: op?.operationId, isPublic: op?.isPublic ?? true, credential: credential || undefined };
  }

  private init(request: Request, signal: AbortSignal): RequestInit {
    return requestInit(request, { userAgent: this.options.userAgent, signal });
  }

  private record(request: Request, response: Response, text: string | undefined, started: number): Exchange {
    const path = request.path.split('?')[0]!;
    const routed = this.routeOf(request.method, path);
    const op = routed.kind === 'operation' ? routed.op : undefined;
    const json = parseJson(text);
    const exchange: Exchange = {
      seq: this.exchanges.length + 1,
      method: request.method.toUpperCase(),
      url: request.path,
      operation: op?.key,
      operationId: op?.operationId,
      status: response.status,
      headers: response.headers,
      text,
      json,
      ms: Math.round(performance.now() - started),
      problems: this.options.contract.judge({
        method: request.method,
        path,
        status: response.status,
        headers: response.headers,
        body: text,
      }),
      caseIndex: this.caseIndex,
      sent: [describeAuth(request), describeBody(request)].filter(Boolean).join(', '),
    };
    this.exchanges.push(exchange);
    return exchange;
  }

  /**
   * `exchange()` sends `request` once: it waits first while the request's count has nothing left
   * (unless the request is meant to provoke 429), and its answer tells the pacer where the count stands.
   */
  private async paced<T extends Exchange>(request: Request, exchange: () => Promise<T>): Promise<T> {
    const counted = this.counted(request);
    const bucket = this.pacer.bucketOf(counted);
    const held = !request.expect429;
    if (held) await this.pacer.take(bucket);
    let answer: T | undefined;
    try {
      answer = await exchange();
      return answer;
    } finally {
      this.pacer.settle(bucket, held, counted, answer);
    }
  }

  /** Sends one request and reads the whole answer. */
  async send(request: Request): Promise<Exchange> {
    for (let attempt = 0; ; attempt++) {
      const exchange = await this.paced(request, async () => {
        const started = performance.now();
        const signal = AbortSignal.timeout(this.options.timeoutMs);
        let response: Response;
        let text: string;
        try {
          response = await fetch(this.options.baseUrl + request.path, this.init(request, signal));
          text = await response.text();
        } catch (error) {
          const reason =
            (error as Error).name === 'TimeoutError'
              ? `no answer within ${this.options.timeoutMs} ms`
              : `${(error as Error).message}${(error as { cause?: Error }).cause ? ` (${(error as { cause: Error }).cause.message})` : ''}`;
          throw new TransportError(`${request.method} ${request.path}: ${reason}`);
        }
        return this.record(request, response, text, started);
      });
      if (exchange.status !== 429 || request.expect429) return exchange;
      this.refusals += 1;
      const seconds = Math.max(1, Number.parseInt(exchange.headers.get('retry-after') ?? '', 10) || 1);
      if (attempt >= 3 || seconds > (this.options.maxWaitSeconds ?? 65)) return exchange;
      // The count is spent for that long, whatever pacing expected: the next attempt waits it out.
      this.pacer.refused(this.pacer.bucketOf(this.counted(request)), seconds);
    }
  }

  /**
   * Opens an event stream: the answer is judged on its status, headers and content type; a 200
   * event stream is handed back open for the case to read (and abort), anything else is read whole.
   */
  openStream(request: Request): Promise<StreamExchange> {
    return this.paced(request, async () => {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), this.options.timeoutMs);
      const started = performance.now();
      let response: Response;
      try {
        response = await fetch(
          this.options.baseUrl + request.path,
          this.init({ ...request, headers: { Accept: 'text/event-stream', ...(request.headers ?? {}) } }, controller.signal),
        );
      } catch (error) {
        throw new TransportError(`${request.method} ${request.path}: ${(error as Error).message}`);
      } finally {
        clearTimeout(timer);
      }
      const isStream = response.status === 200 && /^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '');
      const text = isStream ? undefined : await response.text();
      const exchange = this.record(request, response, text, started);
      return { ...exchange, response, abort: () => controller.abort() };
    });
  }
}

export interface SseMessage {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/** Reads messages from an open event stream until `enough` says so or `timeoutMs` passes. */
export async function readEvents(
  stream: StreamExchange,
  enough: (messages: SseMessage[]) => boolean,
  timeoutMs: number,
): Promise<SseMessage[]> {
  const messages: SseMessage[] = [];
  const reader = stream.response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let current: SseMessage = { id: undefined, event: undefined, data: '' };
  let dataLines: string[] = [];
  const timer = setTimeout(() => stream.abort(), timeoutMs);
  try {
    while (!enough(messages)) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch {
        break; // aborted (timeout) or the connection ended
      }
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (dataLines.length > 0 || current.event !== undefined) messages.push({ ...current, data: dataLines.join('\n') });
          current = { id: current.id, event: undefined, data: '' };
          dataLines = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') dataLines.push(value);
        else if (field === 'event') current.event = value;
        else if (field === 'id') current.id = value;
      }
    }
  } finally {
    clearTimeout(timer);
    stream.abort();
    reader.releaseLock();
  }
  return messages;
}
