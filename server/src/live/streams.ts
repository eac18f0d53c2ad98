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
 * new event on each instance, however many they are. A client narrowed to one feed shares it too:
 * it reads the project's events like the others and is sent only its feed's, its cursor moving past
 * the rest, so resuming from its Last-Event-ID is narrowed the same way.
 *
 * Bounds: a user holds at most `maxStreamsPerUser` streams on an instance (429 `too_many_streams`
 * beyond). At each heartbeat the access of every open stream is checked again, all in one
 * statement; when that check fails (the database is away) the streams end, since access can no
 * longer be vouched for: clients reconnect and resume from their cursor. A logout, a revoked token,
 * a removed member or a deleted project ends the streams it concerns at once, through the bus.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { MikroORM } from '@mikro-orm/postgresql';
import { unitOfWork } from '../db/orm.js';
import type { Logger } from 'pino';
import { eventsAfter, latestEventId } from '../domain/events.js';
import type { StreamViewer } from '../domain/stream-access.js';
import { TooManyStreams } from '../errors.js';
import { presentEvent } from '../presenters/project-presenters.js';
import type { BusMessage } from '../db/commit-notices.js';
import type { EventBus } from './bus.js';

export interface LiveOptions {
  heartbeatMs: number;
  /** Bytes of unread data a client's stream may hold (both of its buffers together). */
  maxBufferedBytes: number;
  /** How long a client may leave its buffer full before it is disconnected. Default 15 s. */
  stallMs?: number;
  maxStreamsPerUser: number;
}

/** For each viewer, in order: may it keep its stream? Asked at every heartbeat, for all streams at once. */
export type AccessCheck = (viewers: StreamViewer[]) => Promise<boolean[]>;

interface Client {
  stream: PassThrough;
  viewer: StreamViewer;
  /** The one feed whose events it is sent; undefined for every feed of the project. */
  feedId: string | undefined;
  /** The id of the last event sent, or passed over (already known to the client, or of another feed). */
  cursor: string;
  /** A read-and-write round is running; `again` asks it to run once more when it ends. */
  pumping: boolean;
  again: boolean;
  /** Waiting for the client to drain its buffer; the timer disconnects it if it does not. */
  blocked: NodeJS.Timeout | undefined;
}

/** An event as its stream message: `id:`, `event:` and `data:` lines. */
interface Message {
  id: string;
  feedId: string;
  text: string;
}

const BATCH = 200;
/** What a refused stream is told to wait: about when one of the user's streams could have ended. */
const RETRY_AFTER_S = 10;
/** Below every UUID: the cursor of a client of a project with no event yet. */
const NIL = '00000000-0000-0000-0000-000000000000';

export class LiveStreams {
  private readonly byProject = new Map<string, Set<Client>>();
  private readonly byCredential = new Map<string, Set<Client>>();
  /** Open streams (and streams being opened) per user. */
  private readonly perUser = new Map<string, number>();
  private checking = false;
  /** Counts the bus's event messages (of every project): a read is shared only by clients asking after the same one. */
  private generation = 0;
  /** Reads in flight, by project, cursor and generation. */
  private readonly reads = new Map<string, Promise<Message[]>>();
  private readonly heartbeat: NodeJS.Timeout;
  private readonly stallMs: number;

  constructor(
    private readonly orm: MikroORM,
    bus: EventBus,
    private readonly checkAccess: AccessCheck,
    private readonly logger: Logger,
    private readonly options: LiveOptions,
  ) {
    this.stallMs = options.stallMs ?? 15_000;
    // Messages missed while the bus reconnected are simply read: every client catches up from its cursor.
    bus.subscribe(
      (message) => this.receive(message),
      () => this.wakeAll(),
    );
    this.heartbeat = setInterval(() => void this.beat(), options.heartbeatMs).unref();
  }

  /**
   * Opens a stream for a viewer the caller has just authorized; throws 429 `too_many_streams` when
   * the user already holds as many as it may. The slot is taken before the first await, so
   * concurrent opens cannot pass the cap together.
   */
  async open(viewer: StreamViewer, lastEventId: string | undefined, feedId?: string): Promise<Readable> {
    const held = this.perUser.get(viewer.userId) ?? 0;
    if (held >= this.options.maxStreamsPerUser) throw new TooManyStreams(this.options.maxStreamsPerUser, RETRY_AFTER_S);
    this.perUser.set(viewer.userId, held + 1);
    let cursor: string;
    try {
      cursor = lastEventId ?? (await this.latestId(viewer.projectId));
    } catch (error) {
      this.release(viewer.userId);
      throw error;
    }
    const stream = new PassThrough({ highWaterMark: Math.max(1024, Math.floor(this.options.maxBufferedBytes / 2)) });
    const client: Client = { stream, viewer, feedId, cursor, pumping: false, again: false, blocked: undefined };
    const clients = join(this.byProject, viewer.projectId, client);
    const sameCredential = join(this.byCredential, viewer.credentialId, client);
    stream.once('close', () => {
      clearTimeout(client.blocked);
      leave(this.byProject, viewer.projectId, clients, client);
      leave(this.byCredential, viewer.credentialId, sameCredential, client);
      this.release(viewer.userId);
    });
    stream.write('retry: 2000\n\n');
    // Not awaited: the catch-up is paced by the client, which reads once the stream is answered.
    void this.pump(client);
    return stream;
  }

  private release(userId: string): void {
    const held = (this.perUser.get(userId) ?? 1) - 1;
    if (held > 0) this.perUser.set(userId, held);
    else this.perUser.delete(userId);
  }

  private async latestId(projectId: string): Promise<string> {
    return (await latestEventId(unitOfWork(this.orm), projectId)) ?? NIL;
  }

  private receive(message: BusMessage): void {
    if (message.kind === 'credential-ended') {
      for (const client of this.byCredential.get(message.credentialId) ?? []) this.end(client);
      return;
    }
    if (message.kind === 'event') this.generation += 1;
    const clients = this.byProject.get(message.projectId);
    if (!clients) return;
    if (message.kind === 'event') {
      for (const client of clients) void this.pump(client);
      return;
    }
    for (const client of clients) {
      if (message.kind === 'project-deleted' || client.viewer.userId === message.userId) this.end(client);
    }
  }

  private wakeAll(): void {
    this.generation += 1;
    for (const clients of this.byProject.values()) for (const client of clients) void this.pump(client);
  }

  /**
   * The messages of the events after `cursor`, oldest first; clients asking the same after the same
   * bus message share the read, and each event is written out once for all of them.
   */
  private read(projectId: string, cursor: string, generation: number): Promise<Message[]> {
    const key = `${projectId}/${cursor}/${generation}`;
    let read = this.reads.get(key);
    if (!read) {
      read = eventsAfter(unitOfWork(this.orm), projectId, cursor, BATCH).then((events) =>
        events.map((event) => ({
          id: event.id,
          feedId: event.feedId,
          text: `id: ${event.id}\nevent: event\ndata: ${JSON.stringify(presentEvent(event))}\n\n`,
        })),
      );
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
          const batch = await this.read(client.viewer.projectId, client.cursor, this.generation);
          for (const message of batch) {
            if (!this.writable(client)) return;
            if (message.id <= client.cursor) continue;
            client.cursor = message.id;
            if (client.feedId !== undefined && message.feedId !== client.feedId) continue;
            if (!client.stream.write(message.text)) {
              this.block(client);
              return;
            }
          }
          if (batch.length < BATCH) break;
        }
      } while (client.again);
    } catch (error) {
      // The client resumes from its Last-Event-ID once the database answers again.
      this.logger.warn({ err: error }, 'live events could not be read; stream closed');
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

  /**
   * Checks every open stream's access in one call (each distinct viewer once), then ends the
   * streams that lost it and sends the others a heartbeat. A check still running when the next
   * beat comes is not doubled.
   */
  private async beat(): Promise<void> {
    if (this.checking || this.byCredential.size === 0) return;
    this.checking = true;
    try {
      const byViewer = new Map<string, { viewer: StreamViewer; clients: Client[] }>();
      for (const clients of this.byProject.values()) {
        for (const client of clients) {
          const { projectId, userId, credentialId } = client.viewer;
          const key = `${projectId}/${userId}/${credentialId}`;
          const entry = byViewer.get(key) ?? { viewer: client.viewer, clients: [] };
          entry.clients.push(client);
          byViewer.set(key, entry);
        }
      }
      const entries = [...byViewer.values()];
      let allowed: boolean[];
      try {
        allowed = await this.checkAccess(entries.map((entry) => entry.viewer));
      } catch (error) {
        this.logger.warn({ err: error, streams: entries.length }, 'live access re-check failed; streams closed');
        allowed = entries.map(() => false);
      }
      entries.forEach((entry, i) => {
        for (const client of entry.clients) {
          if (!allowed[i]) this.end(client);
          else if (this.writable(client) && !client.blocked) client.stream.write(': heartbeat\n\n');
        }
      });
    } finally {
      this.checking = false;
    }
  }

  /** Ends every stream; clients reconnect with Last-Event-ID and catch up from the database. */
  close(): void {
    clearInterval(this.heartbeat);
    for (const clients of this.byProject.values()) for (const client of clients) this.end(client);
  }
}

function join(index: Map<string, Set<Client>>, key: string, client: Client): Set<Client> {
  let clients = index.get(key);
  if (!clients) index.set(key, (clients = new Set()));
  clients.add(client);
  return clients;
}

function leave(index: Map<string, Set<Client>>, key: string, clients: Set<Client>, client: Client): void {
  clients.delete(client);
  if (clients.size === 0 && index.get(key) === clients) index.delete(key);
}
