/**
 * Fan-out between service instances. With PostgreSQL, a message is a NOTIFY on one channel and
 * every instance LISTENs on a dedicated connection, so several instances on one database see each
 * other's events with no other moving part. The embedded database has exactly one owner process,
 * so there the bus is in-process. Messages carry ids only; readers load what they need.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { pgConnectionOptions } from '../db/orm.js';

export type BusMessage =
  | { kind: 'event'; projectId: string; eventId: string }
  | { kind: 'member-removed'; projectId: string; userId: string }
  | { kind: 'project-deleted'; projectId: string }
  /** A session ended (logout) or an API token was revoked: what it opened ends with it. */
  | { kind: 'credential-ended'; credentialId: string };

export interface EventBus {
  /** Sends to every instance, this one included. Call after the change has committed. */
  announce(message: BusMessage): Promise<void>;
  /** Receives every message; `onReset` says messages may have been missed (the listener reconnected). */
  subscribe(onMessage: (message: BusMessage) => void, onReset: () => void): void;
  close(): Promise<void>;
}

const CHANNEL = 'signalboard_live';

function encode(message: BusMessage): string {
  switch (message.kind) {
    case 'event':
      return `e:${message.projectId}:${message.eventId}`;
    case 'member-removed':
      return `m:${message.projectId}:${message.userId}`;
    case 'project-deleted':
      return `d:${message.projectId}`;
    case 'credential-ended':
      return `c:${message.credentialId}`;
  }
}

function decode(payload: string): BusMessage | undefined {
  const [tag, first, second] = payload.split(':');
  if (!first) return undefined;
  if (tag === 'e' && second) return { kind: 'event', projectId: first, eventId: second };
  if (tag === 'm' && second) return { kind: 'member-removed', projectId: first, userId: second };
  if (tag === 'd') return { kind: 'project-deleted', projectId: first };
  if (tag === 'c') return { kind: 'credential-ended', credentialId: first };
  return undefined;
}

export class LocalBus implements EventBus {
  private listeners: ((message: BusMessage) => void)[] = [];

  async announce(message: BusMessage): Promise<void> {
    for (const listener of this.listeners) listener(message);
  }

  subscribe(onMessage: (message: BusMessage) => void): void {
    this.listeners.push(onMessage);
  }

  async close(): Promise<void> {
    this.listeners = [];
  }
}

/** LISTEN/NOTIFY on a connection of its own, reconnected with back-off when it drops. */
export class PostgresBus implements EventBus {
  private listener: pg.Client | undefined;
  private readonly handlers: { onMessage: (m: BusMessage) => void; onReset: () => void }[] = [];
  private closed = false;
  private retryMs = 250;

  private constructor(
    /** The pool's connection settings (db/orm.ts): connecting and the `listen` are bounded, so a stalled server only delays the retries. */
    private readonly connection: pg.ClientConfig,
    /** Runs SQL on the service's pool, which reconnects on its own: announcing never waits for the listener. */
    private readonly execute: (sql: string, params: unknown[]) => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  static async start(
    databaseUrl: string,
    execute: (sql: string, params: unknown[]) => Promise<unknown>,
    logger: Logger,
    bounds: Config['database'],
  ): Promise<PostgresBus> {
    const bus = new PostgresBus(pgConnectionOptions(databaseUrl, bounds), execute, logger);
    await bus.connect();
    return bus;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.connection);
    client.on('notification', ({ payload }) => {
      const message = payload === undefined ? undefined : decode(payload);
      if (message) for (const handler of this.handlers) handler.onMessage(message);
    });
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
    } catch (error) {
      // Not awaited: an unanswered client is destroyed at once, but an orderly end waits for the server.
      client.end().catch(() => undefined);
      throw error;
    }
    this.listener = client;
    this.retryMs = 250;
  }

  private reconnect(client: pg.Client): void {
    if (this.closed || this.listener !== client) return;
    this.listener = undefined;
    client.removeAllListeners('end');
    client.end().catch(() => undefined);
    this.logger.warn('live listener lost; reconnecting');
    const retry = () => {
      if (this.closed) return;
      this.connect()
        .then(() => {
          this.logger.info('live listener back');
          // Whatever was announced meanwhile is lost to this instance: streams must catch up from the database.
          for (const handler of this.handlers) handler.onReset();
        })
        .catch(() => {
          this.retryMs = Math.min(this.retryMs * 2, 5_000);
          setTimeout(retry, this.retryMs).unref();
        });
    };
    setTimeout(retry, this.retryMs).unref();
  }

  async announce(message: BusMessage): Promise<void> {
    await this.execute('select pg_notify(?, ?)', [CHANNEL, encode(message)]);
  }

  subscribe(onMessage: (message: BusMessage) => void, onReset: () => void): void {
    this.handlers.push({ onMessage, onReset });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.end().catch(() => undefined);
  }
}
