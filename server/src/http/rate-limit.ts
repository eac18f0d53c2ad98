/**
 * Rate limits (rate-limiter-flexible). Sign-up, login, the password reset's two steps, the e-mail
 * change's confirm and undo, and every request that asks for the account's password (a password or
 * e-mail change, an account's deletion) count per client address, in one bucket. Every other route
 * counts per caller: a credential that resolved, by the user it acts for (all of a user's sessions
 * and API tokens share one bucket, so a second login or a fiftieth token buys no more requests),
 * and a request without one that resolved (none, malformed, unknown,
 * expired; and every request to a public route, whose credential dispatch does not resolve) by its
 * client address, so made-up tokens share their sender's bucket and no counter is ever keyed by
 * what a client wrote. Counters live in PostgreSQL when there is a server, so every instance
 * shares them, and in memory with the
 * embedded database (one process). Every limited answer carries `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset`.
 *
 * `/cdn` answers count apart, per client address (`CDN_RATE_LIMIT`): they need no credential, and
 * each can be an icon of up to 256 KiB read from the store.
 *
 * The client address is Koa's `ctx.ip`: the socket's peer, or with TRUST_PROXY = n the n-th
 * `X-Forwarded-For` entry from the right, the right-most one no trusted proxy added (app.ts).
 */
import { isIP } from 'node:net';
import type { Context } from 'koa';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import type { Database } from '../db/orm.js';
import { rateLimitStore } from '../db/pool.js';
import type { Caller } from '../domain/scope.js';
import { TooManyRequests } from '../errors.js';

/** Operations that try a password or send mail: counted per client address against the sign-in limit, so that guessing is slow everywhere. */
const AUTH_OPERATIONS = new Set([
  'signup',
  'login',
  'requestPasswordReset',
  'confirmPasswordReset',
  'changePassword',
  'changeEmail',
  'confirmEmailChange',
  'revertEmailChange',
  'deleteCurrentUser',
]);
/** Liveness and readiness are for load balancers; the webhook is Stripe's, authenticated by signature. */
const EXEMPT_OPERATIONS = new Set(['getHealth', 'getReadiness', 'stripeWebhook']);

/**
 * The client's address: `ctx.ip` when it is one (a proxy may write `[v6]:port` or `v4:port`), else
 * the socket's peer, so that what a forwarded header carries never becomes a key or a stored value
 * unless it is an address.
 */
export function clientAddress(ctx: Context): string {
  const candidate = ctx.ip.replace(/^\[([^\]]+)\](?::\d+)?$/, '$1').replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, '$1');
  return isIP(candidate) ? candidate : (ctx.socket.remoteAddress ?? '');
}

/**
 * The bucket an address counts in. IPv4 as it is, also when written as IPv4-mapped IPv6
 * (`::ffff:192.0.2.1`); IPv6 by its /64, the block one subscriber is usually given whole (one
 * client would otherwise have 2^64 buckets). Anything else (no address at all) shares one bucket.
 */
export function addressBucket(address: string): string {
  const plain = address.replace(/%.*$/, '');
  if (isIP(plain) === 4) return plain;
  if (isIP(plain) !== 6) return 'unknown';
  const groups = ipv6Groups(plain);
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (mapped) return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail as two groups). */
function ipv6Groups(address: string): number[] {
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address);
  const pair = (high: string, low: string) => ((Number(high) << 8) | Number(low)).toString(16);
  const hex = dotted ? `${address.slice(0, dotted.index)}${pair(dotted[1]!, dotted[2]!)}:${pair(dotted[3]!, dotted[4]!)}` : address;
  const [head = '', tail] = hex.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const [left, right] = [parse(head), parse(tail ?? '')];
  return tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

export class RateLimits {
  private constructor(
    private readonly auth: RateLimiterAbstract | undefined,
    private readonly api: RateLimiterAbstract | undefined,
    private readonly cdn: RateLimiterAbstract | undefined,
  ) {}

  static create(config: Config, db: Database): RateLimits {
    const limiter = (keyPrefix: string, points: number): RateLimiterAbstract | undefined => {
      if (points === 0) return undefined;
      const options = { keyPrefix, points, duration: 60 };
      if (db.kind === 'embedded') return new RateLimiterMemory(options);
      return new RateLimiterPostgres({
        ...options,
        ...rateLimitStore(db),
        tableName: 'rate_limits',
        tableCreated: true,
      });
    };
    return new RateLimits(
      limiter('auth', config.rateLimits.auth),
      limiter('api', config.rateLimits.api),
      limiter('cdn', config.rateLimits.cdn),
    );
  }

  /** `consume` for a request under `/cdn/`, counted against its client address; undefined, at once, when that limit is off. */
  consumeCdn(ctx: Context): Promise<void> | undefined {
    return this.cdn && this.take(this.cdn, `ip:${addressBucket(clientAddress(ctx))}`, ctx);
  }

  /**
   * Takes one point for this request, or rejects with 429 `rate_limited` and `Retry-After`.
   * `caller`: the credential that resolved, if any; the request counts against its address
   * otherwise. Undefined, at once, when the operation is not limited (exempt, or its limit is off).
   */
  consume(operationId: string, ctx: Context, caller: Caller | undefined): Promise<void> | undefined {
    if (EXEMPT_OPERATIONS.has(operationId)) return undefined;
    const signIn = AUTH_OPERATIONS.has(operationId);
    const limiter = signIn ? this.auth : this.api;
    if (!limiter) return undefined;
    const key = !signIn && caller ? `user:${caller.userId}` : `ip:${addressBucket(clientAddress(ctx))}`;
    return this.take(limiter, key, ctx);
  }

  private async take(limiter: RateLimiterAbstract, key: string, ctx: Context): Promise<void> {
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
