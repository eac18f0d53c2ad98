/**
 * Server-Sent Events of a project's new events.
 *
 * Each client has a cursor: the id of the last event it was sent (its `Last-Event-ID`, or the
 * project's latest event when it connected without one). Whenever there may be something new (a
 * bus message, a new client, the client draining its buffer), the client is sent the events after
 * its cursor, read from the database in id order. Ids of a project's events are handed out in
 * commit order (domain/events.ts), so "after the cursor" never skips an event that committed late:
 * each client gets every event once, in id order, whether it was live or catching up.
 *
 * The database is the buffer: the server writes to a client only while its unread data stays under
 * half of `maxBufferedBytes` per side of its stream, and reads on as it drains, so a long catch-up
 * is paced by the client and a slow reader cannot grow the server's memory. A client that leaves
 * data unread for `stallMs` is disconnected; it resumes with `Last-Event-ID` later.
 *
 * Clients at the same cursor share one read, so a project's caught-up clients cost one query per
 * new event on each instance, however many they are.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { Event, type Project } from '../db/entities.js';
import { presentEvent } from '../presenters/project.js';
import type { BusMessage, EventBus } from './bus.js';

export interface LiveOptions {
  heartbeatMs: number;
  /** Bytes of unread data a client's stream may hold (both of its buffers together). */
  maxBufferedBytes: number;
  /** How long a client may leave its buffer full before it is disconnected. Default 15 s. */
  stallMs?: number;
}

interface Client {
  stream: PassThrough;
  projectId: string;
  userId: string;
  /** The id of the last event sent (or skipped as already known to the client). */
  cursor: string;
  /** Asked at every heartbeat: does this client still have access (member, credential alive)? */
  stillAllowed: () => Promise<boolean>;
  /** A read-and-write round is running; `again` asks it to run once more when it ends. */
  pumping: boolean;
  again: boolean;
  /** Waiting for the client to drain its buffer; the timer disconnects it if it does not. */
  blocked: NodeJS.Timeout | undefined;
}

const BATCH = 200;
/** Below every UUID: the cursor of a client of a project with no event yet. */
const NIL = '00000000-0000-0000-0000-000000000000';

export class LiveStreams {
  private readonly byProject = new Map<string, Set<Client>>();
  /** Counts the bus's event messages (of every project): a read is shared only by clients asking after the same one. */
  private generation = 0;
  /** Reads in flight, by project, cursor and generation. */
  private readonly reads = new Map<string, Promise<Event[]>>();
  private readonly heartbeat: NodeJS.Timeout;
  private readonly stallMs: number;

  constructor(
    private readonly orm: MikroORM,
    bus: EventBus,
    private readonly logger: Logger,
    private readonly options: LiveOptions,
  ) {
    this.stallMs = options.stallMs ?? 15_000;
    // Messages missed while the bus reconnected are simply read: every client catches up from its cursor.
    bus.subscribe((message) => this.receive(message), () => this.wakeAll());
    this.heartbeat = setInterval(() => this.beat(), options.heartbeatMs).unref();
  }

  get clientCount(): number {
    let count = 0;
    for (const clients of this.byProject.values()) count += clients.size;
    return count;
  }

  /** Opens a stream for a member; `stillAllowed` is asked at each heartbeat and ends the stream when false. */
  async open(project: Project, userId: string, lastEventId: string | undefined, stillAllowed: () => Promise<boolean>): Promise<Readable> {
    const cursor = lastEventId ?? (await this.latestId(project.id));
    const stream = new PassThrough({ highWaterMark: Math.max(1024, Math.floor(this.options.maxBufferedBytes / 2)) });
    const client: Client = { stream, projectId: project.id, userId, cursor, stillAllowed, pumping: false, again: false, blocked: undefined };
    const clients = this.byProject.get(project.id) ?? new Set<Client>();
    clients.add(client);
    this.byProject.set(project.id, clients);
    stream.once('close', () => {
      clearTimeout(client.blocked);
      clients.delete(client);
      if (clients.size === 0 && this.byProject.get(project.id) === clients) this.byProject.delete(project.id);
    });
    stream.write('retry: 2000\n\n');
    // Not awaited: the catch-up is paced by the client, which reads once the stream is answered.
    void this.pump(client);
    return stream;
  }

  private async latestId(projectId: string): Promise<string> {
    const [latest] = await this.orm.em.fork().find(Event, { project: projectId }, { orderBy: { id: 'desc' }, limit: 1, fields: ['id'] });
    return latest?.id ?? NIL;
  }

  private receive(message: BusMessage): void {
    if (message.kind === 'event') this.generation += 1;
    const clients = this.byProject.get(message.projectId);
    if (!clients) return;
    if (message.kind === 'event') {
      for (const client of clients) void this.pump(client);
      return;
    }
    for (const client of clients) {
      if (message.kind === 'project-deleted' || client.userId === message.userId) this.end(client);
    }
  }

  private wakeAll(): void {
    this.generation += 1;
    for (const clients of this.byProject.values()) for (const client of clients) void this.pump(client);
  }

  /** The events after `cursor`, oldest first; clients asking the same after the same bus message share the read. */
  private read(projectId: string, cursor: string, generation: number): Promise<Event[]> {
    const key = `${projectId}/${cursor}/${generation}`;
    let read = this.reads.get(key);
    if (!read) {
      read = this.orm.em.fork().find(Event, { project: projectId, id: { $gt: cursor } }, { orderBy: { id: 'asc' }, limit: BATCH, populate: ['feed'] });
      this.reads.set(key, read);
      const forget = () => this.reads.delete(key);
      read.then(forget, forget);
    }
    return read;
  }

  /** Sends the client what follows its cursor, until it is caught up or its buffer is full. */
  private async pump(client: Client): Promise<void> {
    if (client.pumping) {
      client.again = true;
      return;
    }
    client.pumping = true;
    try {
      do {
        client.again = false;
        for (;;) {
          if (!this.writable(client) || client.blocked) return;
          const batch = await this.read(client.projectId, client.cursor, this.generation);
          for (const event of batch) {
            if (!this.writable(client)) return;
            if (event.id <= client.cursor) continue;
            client.cursor = event.id;
            if (!client.stream.write(`id: ${event.id}\nevent: event\ndata: ${JSON.stringify(presentEvent(event))}\n\n`)) {
              this.block(client);
              return;
            }
          }
          if (batch.length < BATCH) break;
        }
      } while (client.again);
    } catch (error) {
      // The client resumes from its Last-Event-ID once the database answers again.
      this.logger.warn({ err: { type: (error as Error).name } }, 'live events could not be read; stream closed');
      client.stream.destroy();
    } finally {
      client.pumping = false;
    }
  }

  /** The buffer is full: wait for the client to read, or disconnect it if it does not in time. */
  private block(client: Client): void {
    client.blocked = setTimeout(() => {
      this.logger.info({ buffered: client.stream.writableLength + client.stream.readableLength }, 'live client too slow; disconnected');
      client.stream.destroy();
    }, this.stallMs);
    client.blocked.unref();
    client.stream.once('drain', () => {
      clearTimeout(client.blocked);
      client.blocked = undefined;
      void this.pump(client);
    });
  }

  private writable(client: Client): boolean {
    return !client.stream.destroyed && !client.stream.writableEnded;
  }

  /** Ends a stream at once: a client with unread data waiting is cut rather than left to drain. */
  private end(client: Client): void {
    if (client.blocked) client.stream.destroy();
    else client.stream.end();
  }

  private beat(): void {
    for (const clients of this.byProject.values()) {
      for (const client of clients) {
        void client
          .stillAllowed()
          .then((allowed) => {
            if (!allowed) this.end(client);
            else if (this.writable(client) && !client.blocked) client.stream.write(': heartbeat\n\n');
          })
          .catch(() => undefined);
      }
    }
  }

  /** Ends every stream; clients reconnect with Last-Event-ID and catch up from the database. */
  closeAll(): void {
    for (const clients of this.byProject.values()) for (const client of clients) this.end(client);
  }

  close(): void {
    clearInterval(this.heartbeat);
    this.closeAll();
  }
}
