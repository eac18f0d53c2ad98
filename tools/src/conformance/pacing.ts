/**
 * The suite keeps to the deployment's rate limits instead of running into them. The contract's
 * conventions (spec/main.tsp) say how requests are counted: the sign-in operations below per client
 * address, against one limit; every other request per user when it carries a valid credential (all
 * of a user's sessions and API tokens in one count), else per client address; and a counted answer
 * carries `RateLimit-Limit`, `RateLimit-Remaining` (what is left of the window after this request)
 * and `RateLimit-Reset` (seconds until the window starts again). For each of those counts the pacer
 * keeps what its latest answer said, and holds a request back until the window resets when no point
 * is left for it, counting the requests still on their way. A run against the default limits thus
 * waits where it would have been refused, and gets no 429 it did not ask for.
 *
 * What it cannot know is left to the fallback in http.ts, a 429 waited out as `Retry-After` says: a
 * deployment that sends none of these headers is never paced; other clients behind the same address
 * spend the same counts unseen; a credential the run did not see issued (a session cookie, say) is
 * taken for one the deployment does not know, counted by address. The pacer never holds back a
 * request that is meant to provoke 429: those skip `take`.
 */

/**
 * The operations the contract counts per client address against the sign-in limit, whatever
 * credential they carry: operationId, method, path, and what it is called in the reports.
 */
export const SIGN_IN_OPERATIONS = [
  ['login', 'POST', '/v1/auth/login', 'login'],
  ['signup', 'POST', '/v1/auth/signup', 'sign-up'],
  ['requestPasswordReset', 'POST', '/v1/auth/password-reset', 'a password reset request'],
  ['confirmPasswordReset', 'POST', '/v1/auth/password-reset/confirm', "a password reset's confirmation"],
  ['changePassword', 'PUT', '/v1/users/me/password', 'a password change'],
  ['changeEmail', 'PUT', '/v1/users/me/email', 'an e-mail change'],
  ['confirmEmailChange', 'POST', '/v1/auth/email-confirm', "an e-mail change's confirmation"],
  ['revertEmailChange', 'POST', '/v1/auth/email-revert', "an e-mail change's undo"],
  ['deleteCurrentUser', 'DELETE', '/v1/users/me', "an account's deletion"],
] as const;

const SIGN_IN_IDS: ReadonlySet<string> = new Set(SIGN_IN_OPERATIONS.map(([operationId]) => operationId));

/** The sign-in count of this address; see `Pacer.bucketOf` for the others. */
export const SIGN_IN = 'sign-in';
const ADDRESS = 'address';

/**
 * Added to every wait: `RateLimit-Reset` is whole seconds and was computed before the answer
 * travelled, and a deployment may round it down.
 */
const RESET_MARGIN_MS = 250;

interface Window {
  remaining: number;
  /** `performance.now()` when the deployment starts the count again. */
  resetsAt: number;
  /** Which header said so: `RateLimit-Reset` while pacing, `Retry-After` after a 429 the run did not ask for. */
  source: 'RateLimit-Reset' | 'Retry-After';
}

/** One wait, for the progress line. */
export interface PacedWait {
  /** Which count, in words. */
  limit: string;
  ms: number;
  source: Window['source'];
}

/** What the pacer needs of a request: the operation it reaches and the credential it carries. */
export interface Counted {
  operationId: string | undefined;
  /** No credential needed: counted by address whatever it carries. */
  isPublic: boolean;
  /** The token sent in `Authorization`, without its scheme; undefined when there is none. */
  credential: string | undefined;
}

/** What the pacer needs of an answer. */
export interface Answered {
  status: number;
  headers: { get(name: string): string | null };
  json: any;
}

function whole(value: string | null): number | undefined {
  if (value === null || !/^\s*\d+\s*$/.test(value)) return undefined;
  return Number(value);
}

export class Pacer {
  /** Count → what its latest answer said. */
  private readonly windows = new Map<string, Window>();
  /** Count → requests sent and not yet answered. */
  private readonly inFlight = new Map<string, number>();
  /** Credential → the id of the user it acts for (learnt from the answers that issued it). */
  private readonly users = new Map<string, string>();
  waits = 0;
  waitedMs = 0;
  /** Requests counted against the sign-in limit of this address, whatever their answer. */
  signInRequests = 0;

  constructor(
    private readonly options: {
      /** A window that resets later than this is not waited for: the request goes, and the fallback decides. */
      maxWaitMs: number;
      onWait?: (wait: PacedWait) => void;
    },
  ) {}

  /** The count a request goes to: the sign-in count, a user's (`user:<id>`), or this address's. */
  bucketOf(request: Counted): string {
    if (request.operationId !== undefined && SIGN_IN_IDS.has(request.operationId)) return SIGN_IN;
    const user = !request.isPublic && request.credential !== undefined ? this.users.get(request.credential) : undefined;
    return user === undefined ? ADDRESS : `user:${user}`;
  }

  /** Holds the request back while its count has no point left for it, then counts it as on its way; `settle` ends that. */
  async take(bucket: string): Promise<void> {
    for (;;) {
      const window = this.windows.get(bucket);
      const now = performance.now();
      const ms = window ? window.resetsAt - now + RESET_MARGIN_MS : 0;
      if (!window || window.resetsAt <= now || window.remaining > (this.inFlight.get(bucket) ?? 0) || ms > this.options.maxWaitMs) break;
      this.options.onWait?.({ limit: describe(bucket), ms, source: window.source });
      const started = performance.now();
      await new Promise((resolve) => setTimeout(resolve, ms));
      this.waits += 1;
      this.waitedMs += performance.now() - started;
    }
    this.inFlight.set(bucket, (this.inFlight.get(bucket) ?? 0) + 1);
  }

  /**
   * A request of `bucket` was answered (`answer`) or failed on the way (undefined); `took`: it had
   * gone through `take`. Reads the count's window from the headers, and learns which user a
   * credential in the answer acts for.
   */
  settle(bucket: string, took: boolean, request: Counted, answer: Answered | undefined): void {
    if (took) this.inFlight.set(bucket, Math.max(0, (this.inFlight.get(bucket) ?? 0) - 1));
    if (!answer) return;
    if (bucket === SIGN_IN) this.signInRequests += 1;
    this.observe(bucket, answer.headers);
    this.learn(request, answer);
  }

  /** A 429 the run did not ask for: the count has nothing left until `Retry-After` has passed. */
  refused(bucket: string, seconds: number): void {
    const resetsAt = performance.now() + seconds * 1000;
    this.windows.set(bucket, {
      remaining: 0,
      resetsAt: Math.max(resetsAt, this.windows.get(bucket)?.resetsAt ?? 0),
      source: 'Retry-After',
    });
  }

  private observe(bucket: string, headers: Answered['headers']): void {
    const remaining = whole(headers.get('ratelimit-remaining'));
    const reset = whole(headers.get('ratelimit-reset'));
    if (remaining === undefined || reset === undefined || whole(headers.get('ratelimit-limit')) === undefined) return;
    const now = performance.now();
    const resetsAt = now + reset * 1000;
    const known = this.windows.get(bucket);
    // Answers to requests sent together may come back in any order: within one window (one reset
    // time, give or take the header's whole second) the lowest figure left is the latest.
    const sameWindow = known !== undefined && known.resetsAt > now && Math.abs(known.resetsAt - resetsAt) < 1500;
    this.windows.set(bucket, {
      remaining: sameWindow ? Math.min(known.remaining, remaining) : remaining,
      resetsAt,
      source: 'RateLimit-Reset',
    });
  }

  private learn(request: Counted, answer: Answered): void {
    // A credential the deployment does not take (made up, revoked, logged out) counts by address from now on.
    if (answer.status === 401 && answer.json?.error?.code === 'unauthenticated' && request.credential !== undefined)
      this.users.delete(request.credential);
    const data = answer.json?.data;
    if (answer.status !== 201 || typeof data?.token !== 'string') return;
    // Sign-up and login name the user of the session they open; an API token acts for the user who made it.
    const user = typeof data.user?.id === 'string' ? (data.user.id as string) : request.credential && this.users.get(request.credential);
    if (user) this.users.set(data.token as string, user);
  }
}

function describe(bucket: string): string {
  if (bucket === SIGN_IN) return "this address's sign-in limit";
  if (bucket === ADDRESS) return "this address's limit for requests without a valid credential";
  return `the limit of user ${bucket.slice('user:'.length)}`;
}
