/**
 * The live stream of a project's events (`GET /v1/projects/{namespace}/events/stream`, Server-Sent
 * Events) as an async iterator that survives dropped connections:
 *
 *   const controller = new AbortController();
 *   for await (const event of streamEvents({ baseUrl, token, namespace: 'acme', signal: controller.signal })) {
 *     console.log(event.feed, event.event);
 *   }
 *
 * When the connection drops, it waits the server's `retry:` delay and reconnects with
 * `Last-Event-ID` set to the id of the last event it yielded: the server first sends what was
 * published meanwhile, so nothing is lost or yielded twice. Aborting `signal` ends it as it ends
 * any call, with a SignalboardAbortError, whether it is connected, connecting or waiting to
 * reconnect; leaving the loop (`break`) ends it quietly. It throws a SignalboardApiError when the
 * service refuses the stream (401, 403, 404, 400). Only global `fetch` and web streams are used: it
 * runs in Node.js ≥ 20, Deno, Bun and browsers.
 * A client's `events.stream(namespace, options)` calls it with the client's URL, token and headers.
 */
import type { components } from '../../spec/generated/openapi.js';
import type { Equal, Expect, PathParam, Query } from './contract.js';
import { SignalboardApiError, type SignalboardConnectionError } from './errors.js';
import { connectionError, pause, throwIfAborted } from './http.js';
import { responseInfo, type ResponseInfo } from './response.js';

type Event = components['schemas']['Event'];

/**
 * The stream's parameters are plain types in StreamEventsOptions, held to the contract's as the
 * generated methods' are (PathParamTypes): a drift fails to compile here.
 */
export type StreamParamTypes = [
  Expect<Equal<string, PathParam<'streamEvents', 'namespace'>>>,
  Expect<Equal<string | undefined, Query<'streamEvents'>['feed']>>,
];

/** One dispatched Server-Sent Events message. */
export interface SseMessage {
  /** The last event ID buffer when the message was dispatched (`id:` lines), if any. */
  id: string | undefined;
  /** The `event:` field; `message` when there was none. */
  event: string;
  /** The `data:` lines, joined with line feeds. */
  data: string;
}

/**
 * An incremental parser of the `text/event-stream` format (WHATWG HTML, "Server-sent events"):
 * feed it decoded text in any chunking; it answers the messages completed so far. Comments and
 * unknown fields are ignored; `retry:` updates `retry`.
 */
export class SseParser {
  /** The reconnection delay the server asked for (ms), once it has. */
  retry: number | undefined;
  private buffer = '';
  private started = false;
  private data: string[] = [];
  private eventType = '';
  private lastEventId: string | undefined;

  push(text: string): SseMessage[] {
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.buffer += text;
    const messages: SseMessage[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      // A CR at the very end may be the first half of a CRLF: decide when more text arrives.
      if (c === 0x0d && i + 1 === this.buffer.length) break;
      const line = this.buffer.slice(start, i);
      if (c === 0x0d && this.buffer.charCodeAt(i + 1) === 0x0a) i++;
      start = i + 1;
      const message = this.line(line);
      if (message) messages.push(message);
    }
    this.buffer = this.buffer.slice(start);
    return messages;
  }

  /** Forgets a half-received message (the connection ended); `retry` and the last id stay. */
  reset(): void {
    this.buffer = '';
    this.data = [];
    this.eventType = '';
    this.started = false;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') {
      const dispatch =
        this.data.length > 0 ? { id: this.lastEventId, event: this.eventType || 'message', data: this.data.join('\n') } : undefined;
      this.data = [];
      this.eventType = '';
      return dispatch;
    }
    if (line.startsWith(':')) return undefined; // a comment (heartbeat)
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        if (!value.includes('\u0000')) this.lastEventId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
    }
    return undefined;
  }
}

/**
 * Why a connection of the stream was lost or not made, by `kind`; `retryInMs` is how long the
 * stream waits before connecting again (with Last-Event-ID, so nothing is missed meanwhile).
 *
 * - `network`: no answer, or the connection broke mid-stream (refused, reset, no such host, cut);
 *   `error` is a SignalboardConnectionError whose `cause` is what fetch threw.
 * - `closed`: the service ended the stream cleanly (it restarted or is draining, or could not
 *   check access again while its database was away).
 * - `status`: the service answered a status that reconnecting may change (429 `too_many_streams`
 *   or `rate_limited`, 5xx); `error` is the SignalboardApiError, and `retryInMs` its Retry-After
 *   when it sent one. A status reconnecting cannot change (400, 401, 403, 404) is thrown instead.
 */
export type StreamDisconnect =
  | { kind: 'network'; error: SignalboardConnectionError; retryInMs: number }
  | { kind: 'closed'; retryInMs: number }
  | { kind: 'status'; status: number; error: SignalboardApiError; retryInMs: number };

export interface StreamEventsOptions {
  /** Where the service runs, e.g. `http://localhost:3000`. */
  baseUrl: string;
  /** A session or API token of a member of the project. */
  token?: string | undefined;
  /** The project's namespace. */
  namespace: string;
  /**
   * Only this feed's events (its name), after a reconnection too. A feed the project does not have
   * throws a SignalboardApiError 404 `not_found`; a malformed name, 400 `invalid_request`.
   */
  feed?: string | undefined;
  /** Resume after this event: the events published since are yielded first, in order. */
  lastEventId?: string | undefined;
  /**
   * Aborting closes the connection and ends the iteration with a SignalboardAbortError (`code`
   * `aborted`, `cause` the signal's reason), as it ends any call; an already aborted signal
   * connects nowhere. Leaving the loop instead (`break`, `return`) ends it without an error.
   */
  signal?: AbortSignal | undefined;
  /** The wait before reconnecting until the server sends its own `retry:` (ms). Default 2000. */
  retryMs?: number | undefined;
  /**
   * Called each time a connection is established (after the first one too), with the Last-Event-ID
   * it resumed from and the answer's head (status, headers, request id, rate limit).
   */
  onOpen?: ((info: { lastEventId: string | undefined; response: ResponseInfo }) => void) | undefined;
  /** Called when a connection is lost or could not be made, with why (see StreamDisconnect), before waiting to reconnect. */
  onDisconnect?: ((reason: StreamDisconnect) => void) | undefined;
  /** The fetch to use; global `fetch` by default. */
  fetch?: typeof fetch | undefined;
  /** Headers sent with each connection, under the stream's own. */
  headers?: Headers | Record<string, string> | undefined;
}

/** Refusals that reconnecting would not change. */
const FINAL_STATUSES = new Set([400, 401, 403, 404]);

export async function* streamEvents(options: StreamEventsOptions): AsyncGenerator<Event, void, undefined> {
  const { signal } = options;
  // Called unbound: a browser's fetch throws when called as a method of another object.
  const doFetch = options.fetch ?? fetch;
  const url =
    `${options.baseUrl.replace(/\/+$/, '')}/v1/projects/${encodeURIComponent(options.namespace)}/events/stream` +
    (options.feed === undefined ? '' : `?feed=${encodeURIComponent(options.feed)}`);
  let lastEventId = options.lastEventId;
  let retryMs = options.retryMs ?? 2000;
  const parser = new SseParser();

  for (;;) {
    throwIfAborted(signal);
    let response: Response;
    try {
      const headers = new Headers(options.headers);
      headers.set('Accept', 'text/event-stream');
      headers.set('Cache-Control', 'no-cache');
      if (options.token) headers.set('Authorization', `Bearer ${options.token}`);
      if (lastEventId) headers.set('Last-Event-ID', lastEventId);
      response = await doFetch(url, {
        headers,
        cache: 'no-store',
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      throwIfAborted(signal);
      options.onDisconnect?.({ kind: 'network', error: connectionError(url, error), retryInMs: retryMs });
      await pause(retryMs, signal);
      continue;
    }

    /** The answer's head, for the errors it may cause (the body is the stream). */
    const answered = { status: response.status, headers: response.headers, body: '' };
    if (!response.ok) {
      const refusal = SignalboardApiError.from({ ...answered, body: await response.text().catch(() => '') });
      if (FINAL_STATUSES.has(response.status)) throw refusal;
      // 429, 5xx: the service is there but cannot serve now; wait (Retry-After when given) and try again.
      const wait = refusal.retryAfter ? refusal.retryAfter * 1000 : retryMs;
      options.onDisconnect?.({ kind: 'status', status: response.status, error: refusal, retryInMs: wait });
      await pause(wait, signal);
      continue;
    }
    if (!response.body || !(response.headers.get('Content-Type') ?? '').startsWith('text/event-stream')) {
      await response.body?.cancel().catch(() => undefined);
      throw SignalboardApiError.unexpected(answered, 'The stream did not answer text/event-stream.');
    }

    options.onOpen?.({ lastEventId, response: responseInfo(response) });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    parser.reset();
    /** Set when the connection broke; a clean end of the body leaves it undefined. */
    let broken: SignalboardConnectionError | undefined;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        for (const message of parser.push(decoder.decode(value, { stream: true }))) {
          if (parser.retry !== undefined) retryMs = parser.retry;
          if (message.event !== 'event') continue;
          const event = JSON.parse(message.data) as Event;
          lastEventId = message.id ?? event.id;
          // An abort while the caller held the last event ends the stream here, not after this chunk's events.
          throwIfAborted(signal);
          yield event;
        }
        if (parser.retry !== undefined) retryMs = parser.retry;
      }
    } catch (error) {
      throwIfAborted(signal);
      if (error instanceof SyntaxError)
        throw SignalboardApiError.unexpected(answered, `The stream sent an event that is not JSON: ${error.message}`);
      broken = connectionError(url, error);
    } finally {
      // Runs too when the caller leaves the loop early: the connection is closed, not leaked.
      await reader.cancel().catch(() => undefined);
    }
    throwIfAborted(signal);
    options.onDisconnect?.(broken ? { kind: 'network', error: broken, retryInMs: retryMs } : { kind: 'closed', retryInMs: retryMs });
    await pause(retryMs, signal);
  }
}
