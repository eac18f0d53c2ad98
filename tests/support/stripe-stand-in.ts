/**
 * A local stand-in for Stripe's API, which the service's `stripe` package is pointed at through
 * STRIPE_API_URL. It records every call it receives and answers as a test tells it to: succeed,
 * fail with 500, hang (never answer), or say the subscription is gone (404 `resource_missing`),
 * optionally after a delay. Never the real Stripe, and nothing in the package is replaced.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type StandInMode = 'succeed' | 'fail' | 'hang' | 'gone';

export interface StandInCall {
  method: string;
  path: string;
  body: string;
  /** Whether the call carried `Authorization: Bearer <the configured key>`. */
  authorized: boolean;
  at: number;
}

const SUBSCRIPTION_PATH = /^\/v1\/subscriptions\/([^/?]+)$/;

export class StripeStandIn {
  readonly calls: StandInCall[] = [];
  mode: StandInMode = 'succeed';
  /** Milliseconds to wait before answering (not used by `hang`). */
  delayMs = 0;
  private readonly hung = new Set<http.ServerResponse>();

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly apiKey: string,
  ) {}

  static async start(apiKey: string): Promise<StripeStandIn> {
    // Requests reach the stand-in only once it exists: after listen() below.
    const server = http.createServer((req, res) => standIn.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const { port } = server.address() as AddressInfo;
    const standIn = new StripeStandIn(server, `http://127.0.0.1:${port}`, apiKey);
    return standIn;
  }

  /** Back to answering at once with success, with no calls recorded; hung requests are dropped. */
  reset(): void {
    this.calls.length = 0;
    this.mode = 'succeed';
    this.delayMs = 0;
    this.releaseHung();
  }

  cancelCalls(subscription?: string): StandInCall[] {
    return this.calls.filter(
      (call) => call.method === 'DELETE' && (subscription === undefined || call.path === `/v1/subscriptions/${subscription}`),
    );
  }

  async close(): Promise<void> {
    this.releaseHung();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private releaseHung(): void {
    for (const res of this.hung) res.destroy();
    this.hung.clear();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      this.calls.push({
        method: req.method ?? '',
        path,
        body: Buffer.concat(chunks).toString('utf8'),
        authorized: req.headers.authorization === `Bearer ${this.apiKey}`,
        at: Date.now(),
      });
      if (this.mode === 'hang') {
        this.hung.add(res);
        res.on('close', () => this.hung.delete(res));
        return;
      }
      const mode = this.mode;
      const answer = () => this.answer(mode, req.method ?? '', path, res);
      if (this.delayMs > 0) setTimeout(answer, this.delayMs);
      else answer();
    });
  }

  private answer(mode: StandInMode, method: string, path: string, res: http.ServerResponse): void {
    const send = (status: number, body: unknown) => {
      if (res.destroyed) return;
      res.writeHead(status, { 'Content-Type': 'application/json', 'Request-Id': `req_standin_${this.calls.length}` });
      res.end(JSON.stringify(body));
    };
    const subscription = SUBSCRIPTION_PATH.exec(path)?.[1];
    if (mode === 'fail') {
      send(500, { error: { type: 'api_error', message: 'The stand-in was told to fail.' } });
    } else if (mode === 'gone' || subscription === undefined) {
      send(
        404,
        subscription === undefined
          ? { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${path}).` } }
          : {
              error: {
                type: 'invalid_request_error',
                code: 'resource_missing',
                param: 'id',
                message: `No such subscription: '${subscription}'`,
              },
            },
      );
    } else if (method === 'DELETE') {
      send(200, { id: subscription, object: 'subscription', status: 'canceled', canceled_at: Math.floor(Date.now() / 1000) });
    } else {
      send(200, { id: subscription, object: 'subscription', status: 'active' });
    }
  }
}
