/**
 * PostgreSQL's NOTIFY and LISTEN, how the instances on one database tell each other about
 * committed changes (the live bus, live/bus.ts, runs on it): a notification is sent on a connection
 * of the service's own pool, which reconnects on its own, so sending never waits for a listener; it
 * is received on a connection of its own that listens on one channel until it is lost or closed.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { pgConnectionOptions, unitOfWork, type ConnectionBounds, type Database } from './orm.js';
import { query } from './raw.js';

/** Sends `payload` on `channel` to every instance listening, this one included. */
export type Notify = (channel: string, payload: string) => Promise<unknown>;

/** Notifications sent on the database's own pool. */
export function notifyThrough(db: Pick<Database, 'orm'>): Notify {
  // A context of its own, never a request's transaction; it holds no entities, so one serves every notification.
  const em: EntityManager = unitOfWork(db.orm);
  return (channel, payload) => query(em, 'select pg_notify(?, ?)', [channel, payload]);
}

/** A connection that listens on one channel until it is lost or closed. */
export interface Listener {
  close(): Promise<void>;
}

export interface ListenerEvents {
  /** A notification's payload. */
  notification(payload: string): void;
  /** The connection failed or ended, once, unless `close` ended it: notifications sent meanwhile are lost. */
  lost(): void;
}

/**
 * Opens a connection with the pool's settings (orm.ts: connecting and each statement are bounded, so a
 * stalled server fails this rather than hangs it) and listens on `channel`. `channel` is an identifier
 * of the service's own, never input.
 */
export async function listen(databaseUrl: string, bounds: ConnectionBounds, channel: string, on: ListenerEvents): Promise<Listener> {
  const client = new pg.Client(pgConnectionOptions(databaseUrl, bounds));
  let open = true;
  // Failures before the listen succeeded reject this call instead.
  let listening = false;
  const end = () => {
    if (!open) return Promise.resolve();
    open = false;
    // Not awaited by a loss: an unanswered client is destroyed at once, but an orderly end waits for the server.
    return client.end().catch(() => undefined);
  };
  const lost = () => {
    if (!open || !listening) return;
    void end();
    on.lost();
  };
  client.on('notification', ({ payload }) => {
    if (payload !== undefined) on.notification(payload);
  });
  client.on('error', lost);
  client.on('end', lost);
  try {
    await client.connect();
    await client.query(`listen ${channel}`);
  } catch (error) {
    void end();
    throw error;
  }
  listening = true;
  return { close: end };
}
