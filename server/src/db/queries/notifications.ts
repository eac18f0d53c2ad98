/**
 * PostgreSQL's NOTIFY and LISTEN: sending a notification on a connection of the pool, and a
 * connection of its own that listens on one channel until it is lost or closed.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Config } from '../../config.js';
import { pgConnectionOptions } from '../orm.js';
import { query } from '../raw.js';

/** Sends `payload` to every session that listens on `channel`, this instance's included. */
export async function notify(em: EntityManager, channel: string, payload: string): Promise<void> {
  await query(em, 'select pg_notify(?, ?)', [channel, payload]);
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
export async function listen(databaseUrl: string, bounds: Config['database'], channel: string, on: ListenerEvents): Promise<Listener> {
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
