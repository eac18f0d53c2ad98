/**
 * How the instances on one PostgreSQL database tell each other about committed changes (the live
 * bus, live/bus.ts, runs on it): a notification is sent on the service's own pool, which reconnects
 * on its own, so sending never waits for a listener; it is received on a connection of its own.
 */
import type { Database } from '../db/orm.js';
import { notify } from '../db/queries/notifications.js';

export { listen, type Listener, type ListenerEvents } from '../db/queries/notifications.js';

/** Sends `payload` on `channel` to every instance listening, this one included. */
export type Notify = (channel: string, payload: string) => Promise<unknown>;

/** Notifications sent on the database's own pool. */
export function notifyThrough(db: Pick<Database, 'orm'>): Notify {
  // A context of its own, never a request's transaction; it holds no entities, so one serves every notification.
  const em = db.orm.em.fork();
  return (channel, payload) => notify(em, channel, payload);
}
