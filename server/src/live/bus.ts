/**
 * Fan-out between service instances. With PostgreSQL, a message is a NOTIFY on one channel and
 * every instance LISTENs on a dedicated connection, so several instances on one database see each
 * other's events with no other moving part. The embedded database has exactly one owner process,
 * so there the bus is in-process. Messages carry ids only; readers load what they need.
 */
import type { Logger } from 'pino';
import type { BusMessage } from '../db/commit-notices.js';
import { listen, type Listener, type Notify } from '../db/listen-notify.js';
import type { ConnectionBounds } from '../db/orm.js';

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

/**
 * NOTIFY on the pool, LISTEN on a connection of its own to the database itself (`DATABASE_DIRECT_URL`:
 * a pooler in transaction mode would deliver nothing to a session it does not hold), reconnected with
 * back-off when it drops.
 */
export class PostgresBus implements EventBus {
  private listener: Listener | undefined;
  private readonly handlers: { onMessage: (m: BusMessage) => void; onReset: () => void }[] = [];
  private closed = false;
  private retryMs = 250;
  /** Projects whose event message is being sent, each with the latest one to send after it. */
  private readonly sending = new Map<string, BusMessage | undefined>();

  private constructor(
    private readonly databaseUrl: string,
    /** The pool's bounds: connecting and the `listen` are bounded, so a stalled server only delays the retries. */
    private readonly bounds: ConnectionBounds,
    private readonly notify: Notify,
    private readonly logger: Logger,
  ) {}

  static async start(databaseUrl: string, notify: Notify, logger: Logger, bounds: ConnectionBounds): Promise<PostgresBus> {
    const bus = new PostgresBus(databaseUrl, bounds, notify, logger);
    await bus.connect();
    return bus;
  }

  private async connect(): Promise<void> {
    const listener = await listen(this.databaseUrl, this.bounds, CHANNEL, {
      notification: (payload) => {
        const message = decode(payload);
        if (message) for (const handler of this.handlers) handler.onMessage(message);
      },
      lost: () => this.reconnect(),
    });
    // Closed while this attempt connected: nothing may keep listening.
    if (this.closed) await listener.close();
    else this.listener = listener;
    this.retryMs = 250;
  }

  private reconnect(): void {
    this.listener = undefined;
    if (this.closed) return;
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

  /**
   * Event messages of a project are coalesced: while one is being sent, later ones wait and only
   * the latest is sent after it. A stream reads everything after its cursor whichever event woke
   * it, so one message after a group of publications wakes it as well as one per publication.
   */
  async announce(message: BusMessage): Promise<void> {
    if (message.kind !== 'event') {
      await this.notify(CHANNEL, encode(message));
      return;
    }
    if (this.sending.has(message.projectId)) {
      this.sending.set(message.projectId, message);
      return;
    }
    try {
      for (let next: BusMessage | undefined = message; next; next = this.sending.get(message.projectId)) {
        this.sending.set(message.projectId, undefined);
        await this.notify(CHANNEL, encode(next));
      }
    } finally {
      this.sending.delete(message.projectId);
    }
  }

  subscribe(onMessage: (message: BusMessage) => void, onReset: () => void): void {
    this.handlers.push({ onMessage, onReset });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.close();
  }
}
