/**
 * A webhook receiver for tests: a real `node:http` server on 127.0.0.1 that records every request
 * (and every connection, so a test can assert that none was made) and answers as the test says.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { freshPostgresDatabase, startServerIn, type TestServer } from './harness.js';
import { serviceDatabaseEnv } from './pgbouncer.js';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

/** How to answer a request: a status and body, or `hang` (never answer). */
export type Answer = { status: number; body?: string } | 'hang';

export class Receiver {
  readonly received: Received[] = [];
  connections = 0;
  answer: (request: Received) => Answer = () => ({ status: 200, body: 'ok' });
  private readonly waiters: { count: number; resolve: () => void }[] = [];

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<Receiver> {
    const server = http.createServer();
    const receiver = new Receiver(server);
    server.on('connection', () => receiver.connections++);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const request = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
        receiver.received.push(request);
        receiver.notify();
        const answer = receiver.answer(request);
        if (answer === 'hang') return;
        res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body ?? '');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Resolves once `count` requests have arrived in all; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs = 10_000): Promise<void> {
    if (this.received.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.received.length} of ${count} requests within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({ count, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) {
      if (this.received.length >= waiter.count) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * A server of its own for webhook tests, on a fresh database (with DATABASE_URL, a new database:
 * the run's own server, whose settings refuse private addresses, must not take its deliveries),
 * allowed to reach this machine's receivers over plain http, and with retries shortened.
 */
export async function startWebhookServer(env: Record<string, string> = {}): Promise<TestServer> {
  const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase(process.env.DATABASE_URL, 'sb_hooks') : undefined;
  const database = fresh ? await serviceDatabaseEnv(fresh.url) : { DATABASE_URL: '' };
  return startServerIn(
    'signalboard-webhooks',
    {
      ...process.env,
      AUTH_RATE_LIMIT: '0',
      API_RATE_LIMIT: '0',
      CDN_RATE_LIMIT: '0',
      ...database,
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: '300ms,600ms',
      WEBHOOK_POLL_MS: '50',
      ...env,
    },
    pino({ level: 'silent' }),
    fresh?.drop,
  );
}
