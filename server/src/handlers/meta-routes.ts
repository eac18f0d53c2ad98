import openApiDocument from '../../../spec/generated/openapi.json' with { type: 'json' };
import { Unavailable } from '../errors.js';
import { ping } from '../db/health.js';
import type { Handler } from '../http/handler-types.js';
import { presentWebhookLimits } from '../webhooks/index.js';

export const getRoot: Handler<'getRoot'> = async ({ services }) => ({
  status: 200,
  data: {
    message: 'Hello from Signalboard. The API reference is at /docs, its contract at /v1/openapi.json.',
    webhooks: presentWebhookLimits(services.config.webhooks),
  },
});

export const getOpenApi: Handler<'getOpenApi'> = async () => ({ status: 200, raw: openApiDocument });

/**
 * Liveness: 200 while the process can serve, 503 once the embedded database has stopped for good
 * (a PANIC, as on a full disk): only a restart of the process opens it again, which is what a
 * supervisor does for a failing liveness check.
 */
export const getHealth: Handler<'getHealth'> = async ({ services }) => {
  if (services.databaseFailure() !== undefined) throw new Unavailable('The embedded database has stopped; the service needs a restart.');
  return { status: 200, data: { status: 'ok' } };
};

/** How long readiness waits for the database: a probe must get its answer well within its own timeout. */
const READINESS_BOUND_MS = 1_500;

/**
 * Readiness: the database answers `select 1` within READINESS_BOUND_MS, whatever the pool is doing
 * (every connection busy, or waiting on a stalled server); else 503 at the bound.
 */
export const getReadiness: Handler<'getReadiness'> = async ({ em }) => {
  const check = ping(em);
  // A check that loses the race still ends within the pool's own bounds; its failure then goes unobserved.
  check.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Unavailable('The database did not answer in time; retry later.', 5)), READINESS_BOUND_MS);
  });
  try {
    await Promise.race([check, bound]);
  } finally {
    clearTimeout(timer);
  }
  return { status: 200, data: { status: 'ok' } };
};
