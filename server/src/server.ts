/**
 * Start and stop the whole service: database (migrated), contract, HTTP server, and in embedded
 * mode the operator channel through which `npm run invite` reaches the running service. Used by
 * main.ts and by the tests, which run the same server in their own process.
 */
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.js';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/orm.js';
import { createBilling } from './billing/index.js';
import { Accounts } from './domain/accounts.js';
import { Contract } from './http/contract.js';
import { Metrics } from './http/metrics.js';
import { RateLimits } from './http/rate-limit.js';
import type { Logger } from './logger.js';
import { startOperatorChannel } from './operator/channel.js';
import { IconStore } from './storage/icons.js';
import { LocalBus, PostgresBus, type BusMessage, type EventBus } from './live/bus.js';
import { LiveStreams } from './live/streams.js';

export interface RunningServer {
  url: string;
  db: Database;
  close(): Promise<void>;
}

export async function startServer(config: Config, logger: Logger): Promise<RunningServer> {
  const [db, contract] = await Promise.all([openDatabase(config, logger), Contract.load()]);
  let url = '';
  // The service's own /cdn address is known once it listens; CDN_URL, when set, replaces it.
  const icons = new IconStore(path.join(config.dataDir, 'icons'), () => config.cdnUrl ?? `${url}/cdn`);
  const bus: EventBus = db.kind === 'postgresql'
    ? await PostgresBus.start(config.databaseUrl!, (sql, params) => db.orm.em.getConnection().execute(sql, params), logger)
    : new LocalBus();
  const live = new LiveStreams(db.orm, bus, logger, { heartbeatMs: 15_000, maxBufferedBytes: 1024 * 1024 });
  const announce = (message: BusMessage) => {
    bus.announce(message).catch((error: unknown) => logger.warn({ err: { type: (error as Error).name }, kind: message.kind }, 'live announce failed'));
  };
  const services = { config, logger, db, contract, accounts: new Accounts(config.bcryptRounds), icons, billing: createBilling(config.stripe, logger), live, announce, rateLimits: RateLimits.create(config, db) };
  const metrics = config.metrics.enabled ? new Metrics(db) : undefined;
  const server = http.createServer(createApp(services, metrics).callback());
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, resolve);
    });
  } catch (error) {
    await db.close();
    throw error;
  }
  const channel = db.kind === 'embedded' ? await startOperatorChannel(db, config.dataDir, logger) : undefined;

  const { port } = server.address() as AddressInfo;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  logger.info({ url, port, database: db.description }, 'listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    db,
    close: () =>
      (closing ??= (async () => {
        await channel?.close();
        live.close();
        await bus.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await db.close();
      })()),
  };
}
