/**
 * Start and stop the whole service: database (migrated), contract, services, HTTP server, and in
 * embedded mode the operator channel through which `npm run invite` reaches the running service.
 * Used by main.ts and by the tests, which run the same server in their own process.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.js';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/orm.js';
import { Contract } from './http/contract.js';
import { Metrics } from './http/metrics.js';
import type { Logger } from './logger.js';
import { startOperatorChannel } from './operator/channel.js';
import { createServices } from './services.js';

export interface RunningServer {
  url: string;
  db: Database;
  close(): Promise<void>;
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
  const stop = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  };
  try {
    let url = '';
    const { services, close } = await createServices(config, logger, db, contract, () => url);
    cleanups.push(close);
    const server = http.createServer(createApp(services, config.metrics.enabled ? await Metrics.create(db) : undefined).callback());
    server.requestTimeout = 30_000;
    server.headersTimeout = 10_000;
    server.keepAliveTimeout = 5_000;
    if (db.kind === 'embedded') cleanups.push((await startOperatorChannel(db, config.dataDir, logger)).close);
    await listen(server, config.port, config.host);
    // Closed first (cleanups run in reverse): the listener stops accepting at once; event streams
    // end (they never finish on their own), then in-flight requests finish and idle keep-alive sockets close.
    cleanups.push(() => new Promise<void>((resolve) => {
      services.live.close();
      server.close(() => resolve());
      server.closeIdleConnections();
    }));

    const { port } = server.address() as AddressInfo;
    const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
    url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    logger.info({ url, port, database: db.description }, 'listening');
    let closing: Promise<void> | undefined;
    return { url, db, close: () => (closing ??= stop()) };
  } catch (error) {
    await stop();
    throw error;
  }
}
