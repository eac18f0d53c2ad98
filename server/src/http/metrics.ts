/**
 * Prometheus metrics at `/metrics`, off unless `METRICS_ENABLED` is set: request counts and latency
 * histograms by operation and status, the database pool's use, and Node's own process metrics.
 * With `METRICS_TOKEN` set, scrapes must send `Authorization: Bearer <token>`.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Counter, Histogram, Registry } from 'prom-client';
import type { Database } from '../db/orm.js';
import { poolUse } from '../db/pool.js';
import { NotFound, Unauthenticated } from '../errors.js';

export class Metrics {
  private constructor(
    readonly registry: Registry,
    private readonly requests: Counter<'operation' | 'status'>,
    private readonly latency: Histogram<'operation'>,
  ) {}

  /** prom-client is loaded here, only when metrics are on. */
  static async create(db: Database): Promise<Metrics> {
    const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } = await import('prom-client');
    const registry = new Registry();
    const requests = new Counter({
      name: 'signalboard_http_requests_total',
      help: 'Requests answered, by operation and status.',
      labelNames: ['operation', 'status'],
      registers: [registry],
    });
    const latency = new Histogram({
      name: 'signalboard_http_request_duration_seconds',
      help: 'Time to answer, by operation.',
      labelNames: ['operation'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    });
    collectDefaultMetrics({ register: registry });
    new Gauge({
      name: 'signalboard_db_pool_connections',
      help: 'Database pool connections, by state.',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const use = poolUse(db);
        if (!use) return;
        this.set({ state: 'used' }, use.used);
        this.set({ state: 'free' }, use.free);
        this.set({ state: 'pending' }, use.pending);
      },
    });
    return new Metrics(registry, requests, latency);
  }

  /** Times every request; the label is the contract's operationId, so paths with ids do not explode the series. */
  observe(): Middleware {
    return async (ctx, next) => {
      const stop = this.latency.startTimer();
      try {
        await next();
      } finally {
        const operation = ctx.state.operationId ?? (ctx.path.startsWith('/cdn/') ? 'cdn' : 'unmatched');
        stop({ operation });
        this.requests.inc({ operation, status: String(ctx.status) });
      }
    };
  }

  endpoint(token: string | undefined): Middleware {
    return async (ctx, next) => {
      if (ctx.path !== '/metrics') return next();
      if (ctx.method !== 'GET') throw new NotFound();
      if (token !== undefined) {
        const presented = Buffer.from(ctx.get('Authorization'));
        const expected = Buffer.from(`Bearer ${token}`);
        if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) throw new Unauthenticated();
      }
      ctx.type = this.registry.contentType;
      ctx.body = await this.registry.metrics();
    };
  }
}
