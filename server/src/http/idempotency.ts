/**
 * Idempotent writes: a write sent with an `Idempotency-Key` is done at most once, however often it
 * is sent. The operations that take a key are those that declare the header in the contract (every
 * POST and PATCH that needs a credential); the contract holds the key to 1–255 visible ASCII
 * characters, so a bad one is 400 before anything here runs. How a key lives, and how instances
 * share it, is domain/idempotency.ts. Per request:
 *
 * - the first request with a key claims it, runs, and records its answer on it;
 * - the same key on the same request (see `fingerprint`) answers the recorded answer again, same
 *   status and body, with `Idempotent-Replayed: true`, and does no work: the answer is what the
 *   first request got, even if what it shows has changed since;
 * - the same key on another request is 422 `idempotency_key_reused`;
 * - while the first request runs, another with its key is 409 `idempotency_in_progress`.
 *
 * A secret is never recorded: a success is recorded without the fields its operation marks
 * `x-secret` in the contract (spec/secrets.tsp), so the table of keys never holds a secret shown
 * once, and a replay answers the same status and body with those fields left out.
 *
 * What is recorded: the handler's successes and its named 4xx refusals (404, 409 …), which a retry
 * would only repeat. (A refusal's own headers are not: the one handler refusal that has any is the
 * 401 of an account deleted meanwhile, whose keys go with it.) A 5xx, or anything else thrown (a
 * lost database, a bug), gives the key back instead, so that a retry does the work: those failures
 * roll the handler's transaction back.
 *
 * One window remains: an instance killed after the handler's transaction committed and before the
 * answer was recorded leaves the work done and no answer, and the retry after the claim's lease
 * does the work again. The answer cannot be recorded in the work's own transaction: handlers own
 * their transactions, and a publish is stored in one shared with other requests (group commit).
 *
 * A request without the header pays nothing here: no statement, no hash.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Context } from 'koa';
import { claimOrRecall, settleKey, type KeyScope, type StoredAnswer } from '../domain/idempotency.js';
import { ApiError } from '../errors.js';
import { failureBody, successBody, type Reply } from './envelope.js';

export const IDEMPOTENCY_KEY = 'Idempotency-Key';

/** Sorts an object's keys (a `JSON.stringify` replacer): one spelling per value. */
function sortedKeys(_key: string, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const object = value as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(object)
      .sort()
      .map((key) => [key, object[key]]),
  );
}

/**
 * What makes two requests the same: SHA-256 of the method, the path as sent (without the query;
 * it cannot hold a line break or a space) and the body as parsed, serialised with its keys sorted. So what a
 * request asks for counts, not how it was spelt: white space, key order, escapes, number spellings
 * (`1.0`, `1`) and a content coding make no other request; any other change of a value does.
 * `credential`: the request of a token limited to projects is another request than the same one of
 * its user's other credentials (see `KeyedRequest`).
 */
export function fingerprint(method: string, path: string, body: unknown, credential?: string): string {
  const hash = createHash('sha256').update(`${method} ${path}${credential === undefined ? '' : ` ${credential}`}\n`);
  if (body !== undefined) hash.update(JSON.stringify(body, sortedKeys));
  return hash.digest('hex');
}

export interface KeyedRequest {
  ctx: Context;
  em: EntityManager;
  scope: KeyScope;
  /** The body as parsed (undefined when there is none). */
  body: unknown;
  /** Where the operation's success answers hold a secret (`ContractOperation.secretFields`): never recorded. */
  secretFields: string[][];
  leaseMs: number;
  /**
   * The id of the credential when it is an API token limited to projects. A replay skips the
   * handler, and with it the check that the project is one the token reaches: so such a token
   * replays only answers it recorded itself, and its user's other credentials' keys are 422 to it.
   */
  limitedCredential?: string | undefined;
}

/** Runs `work` once for the request's key: see the top of this file. */
export async function onceForKey(
  { ctx, em, scope, body, secretFields, leaseMs, limitedCredential }: KeyedRequest,
  work: () => Promise<Reply>,
): Promise<Reply> {
  const claim = randomUUID();
  const recalled = await claimOrRecall(em, scope, {
    fingerprint: fingerprint(ctx.method, ctx.path, body, limitedCredential),
    claim,
    leaseMs,
  });
  if (recalled) {
    ctx.set('Idempotent-Replayed', 'true');
    return replay(recalled);
  }
  // The answer goes out either way: a key left claimed is 409 to its retries until its lease runs out.
  const settle = (step: Promise<void>) =>
    step.catch((error: unknown) => ctx.state.log.warn({ err: error }, 'idempotency key left claimed'));
  let reply: Reply;
  try {
    reply = await work();
  } catch (error) {
    await settle(
      settleKey(
        em,
        scope,
        claim,
        error instanceof ApiError ? { status: error.status, body: JSON.stringify(failureBody(error, ctx.state.logsnag)) } : undefined,
      ),
    );
    throw error;
  }
  const recorded = reply.status === 204 ? null : JSON.stringify(withoutSecrets(successBody(reply), secretFields));
  await settle(settleKey(em, scope, claim, { status: reply.status, body: recorded }));
  return reply;
}

/** `body` as it is recorded: a copy without the fields at `paths` (`*`: every item of a list), or `body` itself when there are none. */
function withoutSecrets(body: unknown, paths: string[][]): unknown {
  if (paths.length === 0) return body;
  const copy = JSON.parse(JSON.stringify(body)) as unknown;
  const drop = (value: unknown, path: string[]): void => {
    if (value === null || typeof value !== 'object') return;
    const [step, ...rest] = path;
    if (step === '*') return Array.isArray(value) ? value.forEach((item) => drop(item, rest)) : undefined;
    const object = value as Record<string, unknown>;
    if (rest.length === 0) delete object[step!];
    else drop(object[step!], rest);
  };
  for (const path of paths) drop(copy, path);
  return copy;
}

/** A recorded answer as the envelope sends it again: the same JSON text (parsing it and serialising it again gives the text back). */
function replay(answer: StoredAnswer): Reply {
  return answer.body === null ? { status: answer.status } : { status: answer.status, raw: JSON.parse(answer.body) as unknown };
}
