import path from 'node:path';
import type { Logger } from 'pino';
import { createBilling } from './billing/index.js';
import type { Config } from './config.js';
import type { Database } from './db/orm.js';
import { Accounts } from './domain/accounts.js';
import { viewersStillAllowed } from './domain/stream-access.js';
import type { SubscriptionCanceller } from './domain/projects.js';
import type { Contract } from './http/contract.js';
import { RateLimits } from './http/rate-limit.js';
import { LocalBus, PostgresBus, type BusMessage, type EventBus } from './live/bus.js';
import { LiveStreams } from './live/streams.js';
import { Maintenance } from './maintenance/prune.js';
import { IconStore } from './storage/icons.js';

/** What handlers may reach beyond their request: built once per server by createServices. */
export interface Services {
  config: Config;
  logger: Logger;
  db: Database;
  contract: Contract;
  accounts: Accounts;
  icons: IconStore;
  billing: SubscriptionCanceller;
  live: LiveStreams;
  rateLimits: RateLimits;
  /** Tells every instance about a committed change (new event, removed member, deleted project); never fails the request. */
  announce(message: BusMessage): void;
}

/**
 * Builds the services over an open database. `publicUrl` is read lazily: the service's own address
 * (for the default `/cdn`) is known only once it listens.
 */
export async function createServices(
  config: Config,
  logger: Logger,
  db: Database,
  contract: Contract,
  publicUrl: () => string,
): Promise<{ services: Services; close(): Promise<void> }> {
  const bus: EventBus =
    db.kind === 'postgresql'
      ? await PostgresBus.start(config.databaseUrl!, (sql, params) => db.orm.em.getConnection().execute(sql, params), logger,
        config.database)
      : new LocalBus();
  const live = new LiveStreams(db.orm, bus, (viewers) => viewersStillAllowed(db.orm.em.fork(), viewers), logger, {
    heartbeatMs: config.live.heartbeatMs,
    maxBufferedBytes: 1024 * 1024,
    maxStreamsPerUser: config.limits.streamsPerUser,
  });
  const services: Services = {
    config,
    logger,
    db,
    contract,
    accounts: new Accounts(config.bcryptRounds),
    icons: new IconStore(path.join(config.dataDir, 'icons'), () => config.cdnUrl ?? `${publicUrl()}/cdn`),
    billing: await createBilling(config.stripe, logger),
    live,
    rateLimits: RateLimits.create(config, db),
    announce(message) {
      bus.announce(message).catch((error: unknown) => logger.warn({ err: { type: (error as Error).name }, kind: message.kind }, 'live announce failed'));
    },
  };
  const maintenance = new Maintenance(db, services.icons, logger, config).start();
  return {
    services,
    close: async () => {
      await maintenance.stop();
      live.close();
      await bus.close();
    },
  };
}
