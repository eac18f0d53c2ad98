/**
 * Rate limits (rate-limiter-flexible). Sign-up, login, the password reset's two steps, the e-mail
 * change's confirm and undo, and every request that asks for the account's password (a password or
 * e-mail change, an account's deletion) count per client address, in one bucket. Every other route
 * counts per caller: a credential that resolved, by the user it acts for (all of a user's sessions
 * and API tokens share one bucket, so a second login or a fiftieth token buys no more requests),
 * and a request without one that resolved (none, malformed, unknown,
 * expired; and every request to a public route, whose credential dispatch does not resolve) by its
 * client address, so made-up tokens share their sender's bucket and no counter is ever keyed by
 * what a client wrote. Sign-in counts live in PostgreSQL when there is a server, exact for every
 * instance; the others in each instance's memory, added up across instances in batches
 * (rate-counter.ts), so that counting costs a request no write. With the embedded database (one
 * process) all count in memory, exactly. Every limited answer carries `RateLimit-Limit`,
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
import type { Logger } from 'pino';
import type { Database } from '../db/orm.js';
import { rateLimitStore } from '../db/pool.js';
import { addRateCounts, dropEndedRateCounts } from '../db/rate-counts.js';
import type { Caller } from '../domain/scope.js';
import { TooManyRequests } from '../errors.js';
import { RateCounter, type Decision, type SharedCounts } from './rate-counter.js';

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

/** The sign-in limit's counter (rate-limiter-flexible, exact: every request counted in its store), or a per-instance count (rate-counter.ts). */
type Limiter = { kind: 'exact'; limiter: RateLimiterAbstract } | { kind: 'counted'; counter: RateCounter };

export class RateLimits {
  private constructor(
    private readonly auth: Limiter | undefined,
    private readonly api: Limiter | undefined,
    private readonly cdn: Limiter | undefined,
  ) {}

  /**
   * Sign-in limits count exactly, each request in the shared store (a guessed password must never
   * get past the limit on another instance); the others count in this instance's memory and add up
   * across instances in batches (rate-counter.ts states the bound).
   */
  static create(config: Config, db: Database, logger: Logger): RateLimits {
    const exact = (keyPrefix: string, points: number): Limiter | undefined => {
      if (points === 0) return undefined;
      const options = { keyPrefix, points, duration: 60 };
      if (db.kind === 'embedded') return { kind: 'exact', limiter: new RateLimiterMemory(options) };
      const limiter = new RateLimiterPostgres({ ...options, ...rateLimitStore(db), tableName: 'rate_limits', tableCreated: true });
      return { kind: 'exact', limiter };
    };
    const shared: SharedCounts | undefined =
      db.kind === 'postgresql'
        ? { add: (deltas, windowMs) => addRateCounts(db, deltas, windowMs), dropEnded: (windowMs) => dropEndedRateCounts(db, windowMs) }
        : undefined;
    const counted = (prefix: string, limit: number): Limiter | undefined =>
      limit === 0
        ? undefined
        : {
            kind: 'counted',
            counter: new RateCounter(prefix, {
              limit,
              shared,
              onSyncError: (error) => logger.warn({ err: error, limit: prefix }, 'rate counts not added up'),
            }),
          };
    return new RateLimits(
      exact('auth', config.rateLimits.auth),
      counted('api', config.rateLimits.api),
      counted('cdn', config.rateLimits.cdn),
    );
  }

  /** `consume` for a request under `/cdn/`, counted against its client address. */
  consumeCdn(ctx: Context): Promise<void> | undefined {
    return this.cdn && this.take(this.cdn, `ip:${addressBucket(clientAddress(ctx))}`, ctx);
  }

  /**
   * Takes one point for this request, or rejects with 429 `rate_limited` and `Retry-After`.
   * `caller`: the credential that resolved, if any; the request counts against its address
   * otherwise. Undefined when the request may go on at once: counted without waiting, or not
   * limited (exempt, or its limit is off).
   */
  consume(operationId: string, ctx: Context, caller: Caller | undefined): Promise<void> | undefined {
    if (EXEMPT_OPERATIONS.has(operationId)) return undefined;
    const signIn = AUTH_OPERATIONS.has(operationId);
    const limiter = signIn ? this.auth : this.api;
    if (!limiter) return undefined;
    const key = !signIn && caller ? `user:${caller.userId}` : `ip:${addressBucket(clientAddress(ctx))}`;
    return this.take(limiter, key, ctx);
  }

  /** Stops the per-instance counts' batches. */
  close(): void {
    for (const limiter of [this.api, this.cdn]) if (limiter?.kind === 'counted') limiter.counter.close();
  }

  /**
   * Counts the request: undefined when it may go on at once (the per-instance counts' usual case,
   * which makes no promise), else a promise that settles once it is judged, rejected with 429.
   */
  private take(limiter: Limiter, key: string, ctx: Context): Promise<void> | undefined {
    const decision = limiter.kind === 'counted' ? limiter.counter.take(key) : exactDecision(limiter.limiter, key);
    if (decision instanceof Promise) return decision.then((judged) => answer(judged, ctx));
    return decision.allowed ? void answer(decision, ctx) : Promise.reject(refusal(decision, ctx));
  }
}

/** Sets the `RateLimit-*` headers; throws 429 `rate_limited` when the request is refused. */
function answer(decision: Decision, ctx: Context): void {
  if (!decision.allowed) throw refusal(decision, ctx);
  setHeaders(decision, ctx);
}

function refusal(decision: Decision, ctx: Context): TooManyRequests {
  setHeaders(decision, ctx);
  return new TooManyRequests(Math.max(1, Math.ceil(decision.msBeforeReset / 1000)));
}

function setHeaders(decision: Decision, ctx: Context): void {
  ctx.set({
    'RateLimit-Limit': String(decision.limit),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(Math.ceil(decision.msBeforeReset / 1000)),
  });
}

async function exactDecision(limiter: RateLimiterAbstract, key: string): Promise<Decision> {
  const judged = (result: RateLimiterRes, allowed: boolean): Decision => ({
    allowed,
    limit: limiter.points,
    remaining: Math.max(0, result.remainingPoints),
    msBeforeReset: result.msBeforeNext,
  });
  try {
    return judged(await limiter.consume(key), true);
  } catch (refused) {
    if (!(refused instanceof RateLimiterRes)) throw refused;
    return judged(refused, false);
  }
}
