/**
 * The server the fuzzer runs against: the service's own startServer, on a database of its own, with
 * rate limits off, cheap bcrypt, and a Stripe configuration that is never reached (so that the
 * webhook verifies signatures instead of answering 503 "billing off"; nothing the fuzzer can do
 * sets a subscription, so nothing calls Stripe).
 *
 * Database: with DATABASE_URL, a fresh database on that server (dropped on close) when `fresh`
 * is set, else DATABASE_URL itself; without it, embedded PGlite in a new temporary folder.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { startServer, type RunningServer } from '../../server/src/server.js';

export type FuzzServer = RunningServer;

export const FUZZ_SERVER_ENV = {
  AUTH_RATE_LIMIT: '0',
  API_RATE_LIMIT: '0',
  BCRYPT_ROUNDS: '4',
  STRIPE_SECRET_KEY: 'sk_test_fuzz_never_used',
  STRIPE_WEBHOOK_SECRET: 'whsec_fuzz_never_used',
  STRIPE_API_URL: 'http://127.0.0.1:9',
  CDN_URL: '',
  CORS_ORIGINS: '',
  METRICS_ENABLED: 'false',
};

export async function startFuzzServer(env: NodeJS.ProcessEnv, options: { fresh?: boolean; logger?: Logger } = {}): Promise<FuzzServer> {
  const fresh = options.fresh ?? true;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-fuzz-'));
  let databaseUrl = env.DATABASE_URL || '';
  let drop = async () => {};
  if (databaseUrl && fresh) {
    const name = `sb_fuzz_${Date.now()}_${randomBytes(3).toString('hex')}`;
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const adminUrl = databaseUrl;
    const url = new URL(databaseUrl);
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
    drop = async () => {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    };
  }
  const config = { ...loadConfig({ ...env, ...FUZZ_SERVER_ENV, DATABASE_URL: databaseUrl }), port: 0, host: '127.0.0.1', dataDir };
  const logger = options.logger ?? pino({ level: 'silent' });
  let server: RunningServer;
  try {
    server = await startServer(config, logger);
  } catch (error) {
    await drop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    ...server,
    close: async () => {
      await server.close();
      await drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
