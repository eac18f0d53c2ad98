import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Database } from './db/orm.js';
import type { Accounts } from './domain/accounts.js';
import type { SubscriptionCanceller } from './domain/projects.js';
import type { Contract } from './http/contract.js';
import type { RateLimits } from './http/rate-limit.js';
import type { BusMessage } from './live/bus.js';
import type { LiveStreams } from './live/streams.js';
import type { IconStore } from './storage/icons.js';

/** What handlers may reach beyond their request: built once in main.ts. */
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
