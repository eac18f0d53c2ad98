/**
 * Tools for the live-stream tests: a raw Server-Sent Events reader over fetch (it keeps the wire
 * text as well as the parsed messages), a socket that asks for the stream and then never reads,
 * waiting helpers, and percentiles for latency figures.
 */
import net from 'node:net';
import { SseParser, type SseMessage } from '../../sdk/src/index.js';

export interface Received extends SseMessage {
  /** performance.now() when the message was parsed. */
  at: number;
}

/** A stream opened with plain fetch: status and headers, the raw text, and every message parsed. */
export class RawStream {
  readonly messages: Received[] = [];
  raw = '';
  retry: number | undefined;
  /** Settles when the connection ends, for whatever reason; the value says which. */
  readonly ended: Promise<'end' | 'error' | 'aborted'>;
  endedAt: number | undefined;
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly response: Response,
    private readonly controller: AbortController,
  ) {
    this.ended = this.read().then((how) => {
      this.endedAt = performance.now();
      this.notify();
      return how;
    });
  }

  /** `headers`: more to send, as a browser's EventSource would (its session cookie, `Sec-Fetch-Site`). */
  static async open(
    url: string,
    options: { token?: string; lastEventId?: string; headers?: Record<string, string> } = {},
  ): Promise<RawStream> {
    const controller = new AbortController();
    const response = await fetch(url, {
      headers: {
        Accept: 'text/event-stream',
        ...(options.token ? { Authorization: `Bearer ${options.token}` } : {}),
        ...(options.lastEventId ? { 'Last-Event-ID': options.lastEventId } : {}),
        ...options.headers,
      },
      signal: controller.signal,
    });
    return new RawStream(response, controller);
  }

  /** The `event` messages only (heartbeats are comments and never show up as messages). */
  get events(): Received[] {
    return this.messages.filter((m) => m.event === 'event');
  }

  /** Resolves once `count` event messages have arrived; rejects after `timeoutMs` or when the stream ends short. */
  async waitForEvents(count: number, timeoutMs = 10_000): Promise<Received[]> {
    await this.until(
      () => this.events.length >= count,
      timeoutMs,
      () => `${this.events.length} of ${count} events`,
    );
    return this.events;
  }

  /** Resolves when `predicate` holds; checked after each chunk and when the stream ends. */
  until(predicate: () => boolean, timeoutMs: number, describe: () => string = () => ''): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (predicate()) {
          finish();
          resolve();
        } else if (this.endedAt !== undefined) {
          finish();
          reject(new Error(`the stream ended first (${describe()})`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`timed out after ${timeoutMs} ms (${describe()})`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  close(): void {
    this.controller.abort();
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private async read(): Promise<'end' | 'error' | 'aborted'> {
    if (!this.response.body) return 'end';
    const parser = new SseParser();
    const decoder = new TextDecoder();
    const reader = this.response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return 'end';
        const text = decoder.decode(value, { stream: true });
        this.raw += text;
        const at = performance.now();
        for (const message of parser.push(text)) this.messages.push({ ...message, at });
        this.retry = parser.retry;
        this.notify();
      }
    } catch {
      return this.controller.signal.aborted ? 'aborted' : 'error';
    }
  }
}

/**
 * A TCP connection that sends the stream request and then reads nothing: the kernel's buffers fill
 * and the server's writes back up. `drain()` starts reading at last and resolves with the bytes
 * received when the server has closed the connection.
 */
export class StalledClient {
  closed = false;
  bytes = 0;
  private readonly socket: net.Socket;
  private readonly closedPromise: Promise<void>;

  private constructor(
    socket: net.Socket,
    /** The first chunk the server sent: status line, headers, usually the `retry:` line. */
    readonly head: string,
  ) {
    this.socket = socket;
    socket.pause();
    this.closedPromise = new Promise((resolve) => {
      socket.once('close', () => {
        this.closed = true;
        resolve();
      });
    });
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      this.bytes += chunk.length;
    });
    socket.pause(); // adding a 'data' listener resumed it
  }

  static async open(url: string, path: string, token: string): Promise<StalledClient> {
    const { hostname, port } = new URL(url);
    const socket = net.connect({ host: hostname, port: Number(port) });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
    );
    // The answer's head (and the `retry:` line) is read, so the test knows the stream is open; nothing after it.
    const head = await new Promise<Buffer>((resolve, reject) => {
      socket.once('data', resolve);
      socket.once('error', reject);
    });
    const client = new StalledClient(socket, head.toString('latin1'));
    return client;
  }

  /** Reads what the kernel holds; resolves true if the server closed the connection within `timeoutMs`. */
  async drain(timeoutMs: number): Promise<boolean> {
    this.socket.resume();
    const timeout = new Promise<false>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref());
    return Promise.race([this.closedPromise.then(() => true as const), timeout]);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Waits until `predicate` holds, polling every `everyMs`; rejects after `timeoutMs`. */
export async function eventually(
  predicate: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 20,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** The q-th percentile (0–100) of `values`, nearest rank. */
export function percentile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((q / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/** Runs `task(i)` for i in [0, count) with at most `parallel` running at once. */
export async function inParallel(count: number, parallel: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
}
