/**
 * 429 on every operation, only with `--rate-limits`. Two limits are counted. Sign-up, login, the
 * password reset's two steps, the e-mail change's confirmation and undo, and the requests that ask
 * for the account's password (a password or e-mail change, an account's deletion) count per client
 * address, before the credential is checked. Every other request counts per caller: by the user a
 * valid credential acts for (all of a user's sessions and API tokens share one bucket), and without
 * one that is valid, by the client address. The suite spends the limit of a throwaway token no one
 * was given (cheap requests to `GET /v1`; the deployment counts it in this address's bucket for
 * requests without a valid credential, or, were it to count per credential, in a bucket of its own:
 * either way that token is spent) and then asks every operation with it; then it spends this
 * address's sign-up and login limit with refused logins. The last part keeps this address from
 * signing up or logging in on the deployment for up to a minute, which is why it runs last and only
 * when asked.
 */
import { randomToken, type CaseContext, type CaseDef } from '../case.js';
import type { ContractModel } from '../contract.js';
import type { Exchange } from '../http.js';
import { SIGN_IN_OPERATIONS } from '../pacing.js';
import { concretePath } from './common.js';

const group = 'rate limits';
const BATCH = 25;
/** A deployment with a higher limit than this is not worth spending from here. */
const MAX_SPEND = 20_000;

/** Sends `send()` until an answer is 429 (or the limit the deployment states, plus a margin, is spent). */
async function spend(t: CaseContext, send: () => Promise<Exchange>): Promise<Exchange> {
  const first = await send();
  if (first.status === 429) return first;
  const limit = Number.parseInt(first.headers.get('ratelimit-limit') ?? '', 10);
  t.check(
    Number.isFinite(limit),
    `no RateLimit-Limit header on ${first.method} ${first.url} (answered ${first.status}): are the deployment's rate limits off? Run ` +
      `without --rate-limits`,
  );
  t.check(limit <= MAX_SPEND, `the limit is ${limit} a minute: more than the suite spends (${MAX_SPEND})`);
  let sent = 1;
  while (sent < limit + BATCH) {
    const batch = await Promise.all(Array.from({ length: BATCH }, () => send()));
    sent += BATCH;
    const refused = batch.find((e) => e.status === 429);
    if (refused) return refused;
  }
  throw new Error(`${sent} requests within the minute, none refused with 429 (RateLimit-Limit says ${limit})`);
}

export function rateLimitCases(contract: ContractModel): CaseDef[] {
  const credential = `Bearer ${randomToken()}`;
  const cases: CaseDef[] = [
    {
      group,
      op: 'GET /v1',
      expect: '429 rate_limited',
      title: "spending a throwaway credential's limit ends in 429 with Retry-After",
      run: async (t) => {
        const refused = await spend(t, () => t.send({ method: 'GET', path: '/v1', authorization: credential, expect429: true }));
        t.expect(refused, 429, 'rate_limited');
        t.check(refused.headers.get('retry-after') !== null, '429 carries Retry-After', refused);
      },
    },
  ];
  for (const op of contract.operations) {
    if (!op.statuses.includes(429) || op.operationId === 'getRoot') continue;
    if (SIGN_IN_OPERATIONS.some(([operationId]) => operationId === op.operationId)) continue;
    cases.push({
      group,
      op: op.key,
      expect: '429 rate_limited (or its answer where the deployment does not limit it)',
      title: 'the spent credential is refused here too',
      run: async (t) => {
        const request = {
          method: op.method,
          path: concretePath(op, 'conformance-x'),
          authorization: credential,
          expect429: true,
          ...(op.hasBody ? { json: {} } : {}),
        };
        const exchange = op.path.endsWith('/stream') ? await t.stream(request) : await t.send(request);
        if ('abort' in exchange && typeof exchange.abort === 'function') exchange.abort();
        if (exchange.status === 429) {
          t.expect(exchange, 429, 'rate_limited');
          return;
        }
        // 429 is documented as possible, not promised: an operation the deployment does not limit
        // (health checks, the webhook) answers as usual, which conforms.
        t.check(exchange.status < 500, `a spent credential got ${exchange.status}`, exchange);
        t.state.notLimited.set(op.key, exchange.status);
        t.note(`not rate-limited by this deployment (answered ${exchange.status})`);
      },
    });
  }
  // Counted per address against the sign-in limit whatever credential they carry: login spends the
  // limit (it comes first), the others find it spent.
  for (const [operationId, method, path, name] of SIGN_IN_OPERATIONS) {
    cases.push({
      group,
      op: `${method} ${path}`,
      expect: '429 rate_limited',
      title:
        operationId === 'login'
          ? "spending this address's sign-up and login limit ends in 429 with Retry-After"
          : `${name} shares the spent limit of this address`,
      run: async (t) => {
        const refused = await spend(t, () => t.send({ method, path, json: {}, expect429: true }));
        t.expect(refused, 429, 'rate_limited');
      },
    });
  }
  return cases;
}
