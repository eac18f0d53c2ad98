/**
 * The server the fuzzer runs against: the service's own startServer, on a database of its own, with
 * rate limits off, cheap bcrypt, and a Stripe configuration that is never reached (so that the
 * webhook verifies signatures, and checkout and portal check their requests, instead of answering
 * 503 "billing off"; nothing the fuzzer can do sets a subscription, and no tier has a price, so
 * checkout answers 400 and the portal 409 before anything would call Stripe).
 *
 * Database: with DATABASE_URL, a fresh database on that server (dropped on close) when `fresh`
 * is set, else DATABASE_URL itself; without it, embedded PGlite in a new temporary folder.
 */
import { pino, type Logger } from 'pino';
import type { RunningServer } from '../../server/src/server.js';
import { freshPostgresDatabase, startServerIn } from './harness.js';

export type FuzzServer = RunningServer;

export const FUZZ_SERVER_ENV = {
  AUTH_RATE_LIMIT: '0',
  API_RATE_LIMIT: '0',
  BCRYPT_ROUNDS: '4',
  STRIPE_SECRET_KEY: 'sk_test_fuzz_never_used',
  STRIPE_WEBHOOK_SECRET: 'whsec_fuzz_never_used',
  STRIPE_API_URL: 'http://127.0.0.1:9',
  STRIPE_PRICE_TIERS: '',
  STRIPE_SUCCESS_URL: 'https://app.example.com/billing/done',
  STRIPE_CANCEL_URL: 'https://app.example.com/billing',
  STRIPE_PORTAL_RETURN_URL: 'https://app.example.com/settings',
  CDN_URL: '',
  CORS_ORIGINS: '',
  METRICS_ENABLED: 'false',
};

export async function startFuzzServer(env: NodeJS.ProcessEnv, options: { fresh?: boolean; logger?: Logger } = {}): Promise<FuzzServer> {
  const fresh = env.DATABASE_URL && (options.fresh ?? true) ? await freshPostgresDatabase(env.DATABASE_URL, 'sb_fuzz') : undefined;
  const serverEnv = { ...env, ...FUZZ_SERVER_ENV, DATABASE_URL: fresh?.url ?? env.DATABASE_URL ?? '' };
  return startServerIn('signalboard-fuzz', serverEnv, options.logger ?? pino({ level: 'silent' }), fresh?.drop);
}
