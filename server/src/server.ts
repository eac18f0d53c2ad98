/**
 * Start and stop the whole service: database (migrated), contract, services, HTTP server, and in
 * embedded mode the operator channel through which `npm run invite` reaches the running service.
 * Used by main.ts and by the tests, which run the same server in their own process.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.js';
import type { Config } from './config.js';
import { openDatabase, unitOfWork, type Database } from './db/orm.js';
import { firstRunInviteCode } from './domain/invite-codes.js';
import { capConnectionsPerAddress } from './http/address-connections.js';
import { Contract } from './http/contract.js';
import { ConnectionDrain, type DrainReport } from './http/drain.js';
import { Metrics } from './http/metrics.js';
import type { Logger } from './logger.js';
import { startOperatorChannel } from './operator/channel.js';
import { createServices } from './services.js';

export interface RunningServer {
  url: string;
  db: Database;
  /** Drains HTTP (see http/drain.ts), then closes everything else; throws `ShutdownIncomplete` if the drain's deadline cut connections. */
  close(): Promise<void>;
}

export class ShutdownIncomplete extends Error {
  constructor(readonly report: DrainReport) {
    super(`the drain deadline passed with ${report.cut} connection(s) still open; they were cut`);
  }
}

/**
 * With no account in the database, a one-use invite code for the first, as a link to the console's
 * sign-up page at `url`: `PUBLIC_URL`, else the address the service listens on. The code is in the
 * line's message, which the logger's censoring (by key, logger.ts) leaves as it is: the line is for
 * the operator who started the service, and the code is useless once an account exists or it expires.
 */
async function announceFirstRun(db: Database, url: string, logger: Logger): Promise<void> {
  const first = await firstRunInviteCode(unitOfWork(db.orm));
  if (first) logger.info(`Create the first account: ${url}/signup?invite=${first.code}`);
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
}

export async function startServer(config: Config, logger: Logger): Promise<RunningServer> {
  const [db, contract] = await Promise.all([openDatabase(config, logger), Contract.load()]);
  // Undone in reverse order on close, or at once if starting fails half-way.
  const cleanups: (() => Promise<void>)[] = [() => db.close()];
  let incomplete: ShutdownIncomplete | undefined;
  const stop = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    if (incomplete) throw incomplete;
  };
  try {
    let url = '';
    const { services, rateLimits, close } = await createServices(config, logger, db, () => url);
    cleanups.push(close);
    const metrics = config.metrics.enabled ? await Metrics.create(db) : undefined;
    const app = createApp(services, { contract, orm: db.orm, rateLimits }, metrics).callback();
    const server = http.createServer({
      // A slow client is bounded by these, checked every second rather than Node's default 30 s.
      headersTimeout: config.http.headersTimeoutMs,
      requestTimeout: config.http.requestTimeoutMs,
      keepAliveTimeout: config.http.keepAliveTimeoutMs,
      connectionsCheckingInterval: 1_000,
    });
    // Further connections are closed as soon as they are accepted.
    server.maxConnections = config.http.maxConnections;
    capConnectionsPerAddress(server, config.http.maxConnectionsPerAddress);
    const drain = new ConnectionDrain(server);
    server.on('request', (req, res) => {
      drain.track(res);
      void app(req, res);
    });
    if (db.kind === 'embedded')
      cleanups.push(
        (
          await startOperatorChannel(db, config.dataDir, logger, {
            passwordResetUrl: config.passwordReset.url,
            emailConfirmUrl: config.emailChange.confirmUrl,
          })
        ).close,
      );
    await listen(server, config.port, config.host);
    // Drained first (cleanups run in reverse), while the database still serves what is in flight.
    cleanups.push(async () => {
      const report = await drain.drain(config.http.shutdownTimeoutMs, () => services.live.close());
      logger.info(report, report.drained ? 'drained' : 'drain deadline passed');
      if (!report.drained) incomplete = new ShutdownIncomplete(report);
    });

    const { port } = server.address() as AddressInfo;
    const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
    url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    logger.info({ url, port, database: db.description }, 'listening');
    await announceFirstRun(db, config.publicUrl ?? url, logger);
    let closing: Promise<void> | undefined;
    return { url, db, close: () => (closing ??= stop()) };
  } catch (error) {
    await stop();
    throw error;
  }
}
