/**
 * Rate limits (rate-limiter-flexible): sign-up and login per client address, every other route per
 * credential (or per address when there is none). Counters live in PostgreSQL when there is a
 * server, so every instance shares them, and in memory with the embedded database (one process).
 * Every limited answer carries `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`.
 */
import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import type { Database } from '../db/orm.js';
import { TooManyRequests } from '../errors.js';

const AUTH_OPERATIONS = new Set(['signup', 'login']);
/** Liveness and readiness are for load balancers; the webhook is Stripe's, authenticated by signature. */
const EXEMPT_OPERATIONS = new Set(['getHealth', 'getReadiness', 'stripeWebhook']);

export class RateLimits {
  private constructor(
    private readonly auth: RateLimiterAbstract | undefined,
    private readonly api: RateLimiterAbstract | undefined,
  ) {}

  static create(config: Config, db: Database): RateLimits {
    const limiter = (keyPrefix: string, points: number): RateLimiterAbstract | undefined => {
      if (points === 0) return undefined;
      const options = { keyPrefix, points, duration: 60 };
      if (db.kind === 'embedded') return new RateLimiterMemory(options);
      return new RateLimiterPostgres({
        ...options,
        storeClient: db.orm.em.getConnection().getKnex(),
        storeType: 'knex',
        tableName: 'rate_limits',
        tableCreated: true,
      });
    };
    return new RateLimits(limiter('auth', config.rateLimits.auth), limiter('api', config.rateLimits.api));
  }

  /** Takes one point for this request, or throws 429 `rate_limited` with `Retry-After`. */
  async consume(operationId: string, ctx: Context): Promise<void> {
    if (EXEMPT_OPERATIONS.has(operationId)) return;
    const byAddress = AUTH_OPERATIONS.has(operationId);
    const limiter = byAddress ? this.auth : this.api;
    if (!limiter) return;
    const token = byAddress ? '' : ctx.get('Authorization');
    // The credential is hashed: counters never hold a usable token.
    const key = token ? `cred:${createHash('sha256').update(token).digest('hex')}` : `ip:${ctx.ip}`;
    let result: RateLimiterRes;
    try {
      result = await limiter.consume(key);
    } catch (refused) {
      if (!(refused instanceof RateLimiterRes)) throw refused;
      this.setHeaders(ctx, limiter, refused);
      throw new TooManyRequests(Math.max(1, Math.ceil(refused.msBeforeNext / 1000)));
    }
    this.setHeaders(ctx, limiter, result);
  }

  private setHeaders(ctx: Context, limiter: RateLimiterAbstract, result: RateLimiterRes): void {
    ctx.set({
      'RateLimit-Limit': String(limiter.points),
      'RateLimit-Remaining': String(Math.max(0, result.remainingPoints)),
      'RateLimit-Reset': String(Math.ceil(result.msBeforeNext / 1000)),
    });
  }
}
