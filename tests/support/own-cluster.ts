/**
 * The service on a PostgreSQL cluster of the test's own (pg-cluster.ts), for the tests that stop,
 * freeze or kill the database under it, and a raw HTTP call that reports an answer that never came
 * instead of hanging the test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../server/src/config.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { outputDir } from './harness.js';
import { send, type Answer } from './http.js';
import { createCluster, findPostgresBinaries, type PgCluster } from './pg-cluster.js';
import { serviceDatabaseEnv } from './pgbouncer.js';

/** DB_STATEMENT_TIMEOUT_MS's default, which the service on the cluster keeps. */
const DEFAULT_STATEMENT_TIMEOUT_MS = loadConfig({}).database.statementTimeoutMs;

export interface ClusterAnswer extends Answer {
  /** `METHOD /path`, for the messages. */
  request: string;
  /** 0: no answer within 20 s. */
  status: number;
  ms: number;
}

/** A JSON call that gives up after 20 s and says so (status 0), for a database that may hang the service. */
export async function callService(base: string, method: string, urlPath: string, token?: string, body?: unknown): Promise<ClusterAnswer> {
  const request = `${method} ${urlPath}`;
  const started = performance.now();
  try {
    const answer = await send(
      base,
      { method, path: urlPath, ...(token ? { token } : {}), ...(body === undefined ? {} : { json: body }) },
      { timeoutMs: 20_000 },
    );
    return { ...answer, request, ms: performance.now() - started };
  } catch (error) {
    if ((error as Error).name !== 'TimeoutError') throw error;
    const json = { noAnswerWithinMs: 20_000 };
    return { request, status: 0, headers: new Headers(), text: JSON.stringify(json), json, ms: performance.now() - started };
  }
}

export interface ServiceOnCluster {
  cluster: PgCluster;
  server: RunningServer;
  config: Config;
  close(): Promise<void>;
}

/**
 * A fresh cluster with a database `signalboard`, and the service on it (with TEST_POOLER=1, through
 * PgBouncer in transaction mode) with rate limits and billing off and the database bounds at their
 * defaults; undefined, with the reason printed, on a machine
 * without initdb. It logs into the run's log, which the end-of-run check searches for leaked secrets.
 */
export async function startServiceOnOwnCluster(label: string): Promise<ServiceOnCluster | undefined> {
  const { bin, reason } = findPostgresBinaries();
  if (!bin) {
    console.log(`      skipped: ${reason}`);
    return undefined;
  }
  const cluster = await createCluster(bin);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `signalboard-${label}-`));
  const close = async (server?: RunningServer) => {
    await server?.close().catch(() => {});
    await cluster.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await cluster.psql('create database signalboard');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...(await serviceDatabaseEnv(cluster.url('signalboard'), DEFAULT_STATEMENT_TIMEOUT_MS)),
      AUTH_RATE_LIMIT: '0',
      API_RATE_LIMIT: '0',
      BCRYPT_ROUNDS: '4',
      STRIPE_SECRET_KEY: '',
    };
    for (const name of ['DB_CONNECT_TIMEOUT_MS', 'DB_ACQUIRE_TIMEOUT_MS', 'DB_STATEMENT_TIMEOUT_MS']) delete env[name];
    const config = { ...loadConfig(env), port: 0, host: '127.0.0.1', dataDir };
    const server = await startServer(
      config,
      pino({ level: 'info' }, pino.destination({ dest: path.join(outputDir, 'server.log'), sync: true })),
    );
    const version = (await cluster.psql('show server_version')).trim();
    console.log(`      own cluster: ${version} on port ${cluster.port}; bounds ${JSON.stringify(config.database)}`);
    return { cluster, server, config, close: () => close(server) };
  } catch (error) {
    await close();
    throw error;
  }
}
