/**
 * A local stand-in for Stripe's API, which the service's `stripe` package is pointed at through
 * STRIPE_API_URL. It records every call it receives and answers as a test tells it to: succeed,
 * fail with 500, hang (never answer), or say the subscription is gone (404 `resource_missing`),
 * optionally after a delay. Never the real Stripe, and nothing in the package is replaced.
 *
 * What it serves: cancelling and reading a subscription (whose customer is `cus_for_<id>`),
 * creating Checkout Sessions and Customer Portal sessions. As Stripe does, a create sent again with
 * the same `Idempotency-Key` gets the first answer again and creates nothing.
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
  /** The `Idempotency-Key` header the package sent (it makes one up for a retried create without one). */
  idempotencyKey: string | undefined;
  at: number;
}

/** A create's parameters, from the form the package sends: `line_items[0][price]` and so on, as one flat map. */
export function formOf(call: StandInCall): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(call.body));
}

const SUBSCRIPTION_PATH = /^\/v1\/subscriptions\/([^/?]+)$/;
const CHECKOUT_PATH = '/v1/checkout/sessions';
const PORTAL_PATH = '/v1/billing_portal/sessions';

export class StripeStandIn {
  readonly calls: StandInCall[] = [];
  /** The sessions it created (a create replayed for its idempotency key is not a new one). */
  readonly checkoutSessions: { id: string; url: string; form: Record<string, string> }[] = [];
  readonly portalSessions: { url: string; form: Record<string, string> }[] = [];
  mode: StandInMode = 'succeed';
  /** Milliseconds to wait before answering (not used by `hang`). */
  delayMs = 0;
  private readonly hung = new Set<http.ServerResponse>();
  /** First answers to creates, by idempotency key. */
  private readonly replies = new Map<string, unknown>();
  private created = 0;

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
    this.checkoutSessions.length = 0;
    this.portalSessions.length = 0;
    this.replies.clear();
    this.mode = 'succeed';
    this.delayMs = 0;
    this.releaseHung();
  }

  cancelCalls(subscription?: string): StandInCall[] {
    return this.calls.filter(
      (call) => call.method === 'DELETE' && (subscription === undefined || call.path === `/v1/subscriptions/${subscription}`),
    );
  }

  checkoutCalls(): StandInCall[] {
    return this.calls.filter((call) => call.method === 'POST' && call.path === CHECKOUT_PATH);
  }

  portalCalls(): StandInCall[] {
    return this.calls.filter((call) => call.method === 'POST' && call.path === PORTAL_PATH);
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
        idempotencyKey: req.headers['idempotency-key'] as string | undefined,
        at: Date.now(),
      });
      if (this.mode === 'hang') {
        this.hung.add(res);
        res.on('close', () => this.hung.delete(res));
        return;
      }
      const mode = this.mode;
      const call = this.calls.at(-1)!;
      const answer = () => this.answer(mode, call, res);
      if (this.delayMs > 0) setTimeout(answer, this.delayMs);
      else answer();
    });
  }

  private answer(mode: StandInMode, call: StandInCall, res: http.ServerResponse): void {
    const send = (status: number, body: unknown) => {
      if (res.destroyed) return;
      res.writeHead(status, { 'Content-Type': 'application/json', 'Request-Id': `req_standin_${this.calls.length}` });
      res.end(JSON.stringify(body));
    };
    const { method, path } = call;
    const subscription = SUBSCRIPTION_PATH.exec(path)?.[1];
    const create = method === 'POST' && (path === CHECKOUT_PATH || path === PORTAL_PATH);
    if (mode === 'fail') {
      send(500, { error: { type: 'api_error', message: 'The stand-in was told to fail.' } });
    } else if (create) {
      const key = call.idempotencyKey && `${path} ${call.idempotencyKey}`;
      const reply = (key && this.replies.get(key)) ?? this.createSession(path, formOf(call));
      if (key) this.replies.set(key, reply);
      send(200, reply);
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
      send(200, { id: subscription, object: 'subscription', status: 'active', customer: `cus_for_${subscription}` });
    }
  }

  private createSession(path: string, form: Record<string, string>): Record<string, unknown> {
    this.created += 1;
    if (path === CHECKOUT_PATH) {
      const id = `cs_test_standin${this.created}`;
      const url = `https://checkout.stripe.test/c/pay/${id}`;
      this.checkoutSessions.push({ id, url, form });
      return { id, object: 'checkout.session', mode: form.mode, client_reference_id: form.client_reference_id ?? null, url };
    }
    const url = `https://billing.stripe.test/p/session/test_standin${this.created}`;
    this.portalSessions.push({ url, form });
    return {
      id: `bps_standin${this.created}`,
      object: 'billing_portal.session',
      customer: form.customer,
      return_url: form.return_url,
      url,
    };
  }
}
