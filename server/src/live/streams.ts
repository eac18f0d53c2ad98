/**
 * Server-Sent Events of a project's new events. Each client first gets what it missed (events after
 * its `Last-Event-ID`, oldest first), then live ones; nothing is sent twice. A client that does not
 * read is cut off once its buffer passes a bound, so it cannot grow the server's memory; it resumes
 * with `Last-Event-ID` and catches up from the database.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { Event, type Project } from '../db/entities.js';
import { presentEvent } from '../presenters/project.js';
import type { BusMessage, EventBus } from './bus.js';

export interface LiveOptions {
  heartbeatMs: number;
  /** Bytes a client may leave unread before it is disconnected. */
  maxBufferedBytes: number;
}

interface Client {
  stream: PassThrough;
  userId: string;
  /** Events that arrived while the backlog was being sent; null once live. */
  pending: Event[] | null;
  /** Ids already sent, to drop the overlap between backlog and live delivery. */
  sent: Set<string>;
}

const BACKLOG_BATCH = 500;
const SENT_MEMORY = 2_000;

export class LiveStreams {
  private readonly byProject = new Map<string, Set<Client>>();
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly orm: MikroORM,
    bus: EventBus,
    private readonly logger: Logger,
    private readonly options: LiveOptions,
    /** Asked at every heartbeat: does this client still have access (member, credential alive)? */
  ) {
    bus.subscribe((message) => void this.receive(message), () => this.closeAll());
    this.heartbeat = setInterval(() => this.beat(), options.heartbeatMs).unref();
  }

  get clientCount(): number {
    let count = 0;
    for (const clients of this.byProject.values()) count += clients.size;
    return count;
  }

  /** Opens a stream for a member; `stillAllowed` is asked at each heartbeat and ends the stream when false. */
  async open(project: Project, userId: string, lastEventId: string | undefined, stillAllowed: () => Promise<boolean>): Promise<Readable> {
    const stream = new PassThrough();
    const client: Client = { stream, userId, pending: [], sent: new Set() };
    // Registered before the backlog is read, so an event committed in between is not missed.
    const clients = this.byProject.get(project.id) ?? new Set();
    clients.add(client);
    this.byProject.set(project.id, clients);
    stream.once('close', () => {
      clients.delete(client);
      if (clients.size === 0) this.byProject.delete(project.id);
    });
    (stream as PassThrough & { stillAllowed?: () => Promise<boolean> }).stillAllowed = stillAllowed;

    stream.write('retry: 2000\n\n');
    if (lastEventId) {
      let after = lastEventId;
      for (;;) {
        const batch = await this.orm.em.fork().find(Event, { project: project.id, id: { $gt: after } }, { orderBy: { id: 'asc' }, limit: BACKLOG_BATCH, populate: ['feed'] });
        for (const event of batch) this.write(client, event);
        if (batch.length < BACKLOG_BATCH || stream.destroyed) break;
        after = batch.at(-1)!.id;
      }
    }
    const pending = client.pending ?? [];
    client.pending = null;
    for (const event of pending) this.write(client, event);
    return stream;
  }

  private async receive(message: BusMessage): Promise<void> {
    const clients = this.byProject.get(message.projectId);
    if (!clients) return;
    if (message.kind === 'event') {
      // Loaded once per instance, whatever the number of clients.
      const event = await this.orm.em.fork().findOne(Event, { id: message.eventId }, { populate: ['feed'] }).catch((error: unknown) => {
        this.logger.warn({ err: { type: (error as Error).name } }, 'live event could not be loaded');
        return null;
      });
      if (!event) return;
      for (const client of clients) {
        if (client.pending) client.pending.push(event);
        else this.write(client, event);
      }
      return;
    }
    for (const client of clients) {
      if (message.kind === 'project-deleted' || client.userId === message.userId) client.stream.end();
    }
  }

  private write(client: Client, event: Event): void {
    if (client.sent.has(event.id) || client.stream.destroyed) return;
    client.sent.add(event.id);
    if (client.sent.size > SENT_MEMORY) client.sent.delete(client.sent.values().next().value!);
    client.stream.write(`id: ${event.id}\nevent: event\ndata: ${JSON.stringify(presentEvent(event))}\n\n`);
    if (client.stream.writableLength > this.options.maxBufferedBytes) {
      this.logger.info({ buffered: client.stream.writableLength }, 'live client too slow; disconnected');
      client.stream.destroy();
    }
  }

  private beat(): void {
    for (const clients of this.byProject.values()) {
      for (const client of clients) {
        const check = (client.stream as PassThrough & { stillAllowed?: () => Promise<boolean> }).stillAllowed;
        void check?.()
          .then((allowed) => (allowed ? client.stream.write(': heartbeat\n\n') : client.stream.end()))
          .catch(() => undefined);
      }
    }
  }

  /** Ends every stream; clients reconnect with Last-Event-ID and catch up from the database. */
  closeAll(): void {
    for (const clients of this.byProject.values()) for (const client of clients) client.stream.end();
  }

  close(): void {
    clearInterval(this.heartbeat);
    this.closeAll();
  }
}
