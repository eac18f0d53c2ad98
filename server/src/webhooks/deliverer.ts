/**
 * Sends the deliveries that are due, on every instance (docs/webhooks.md, How deliveries go out).
 *
 * A cycle claims due deliveries (db/repositories/webhook-outbox.ts, `claimDue`: skip-locked, with a lease
 * of four attempt timeouts), sends each endpoint's batch with a few attempts at once, and writes the
 * batch's outcomes in one statement. Isolation, so one endpoint never delays another's deliveries:
 * - an endpoint has one batch in flight at a time (`BATCH` deliveries, `PER_ENDPOINT` attempts at
 *   once), and is not claimed for again until it is written back; a batch ends within two attempt
 *   timeouts, inside its lease, so a slow endpoint's deliveries are never claimed twice;
 * - an endpoint whose last batch failed without a success (down, slow, refusing) is probed with one
 *   delivery a batch until one succeeds, so a dead endpoint holds one slot, not a batch's worth;
 * - the instance has at most `concurrency` deliveries claimed in all, and claims for endpoints in
 *   no order of theirs, so a project with many endpoints cannot hold every slot for long.
 * A cycle runs when the bus says events were stored (on any instance), when a change here queued
 * deliveries, when a batch ends, and every `pollMs` (retries come due, other instances' changes).
 */
import http from 'node:http';
import https from 'node:https';
import type { Logger } from 'pino';
import type { WebhookSettings } from '../config.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { unitOfWork, type Database } from '../db/orm.js';
import {
  claimDue,
  settle,
  vacuumDeliveries,
  type ClaimedDelivery,
  type DisabledEndpoint,
  type Outcome,
} from '../db/repositories/webhook-outbox.js';
import type { ChangeShapes } from '../domain/change-shapes.js';
import { guardedLookup } from './address-guard.js';
import { messagesOf, requestFor, type Message } from './messages.js';
import { delivered, logEntry, send, type AttemptResult } from './send.js';

/** Deliveries claimed for one endpoint at a time. */
const BATCH = 64;
/** Attempts at one endpoint at once. BATCH / PER_ENDPOINT attempt timeouts must fit in the lease. */
const PER_ENDPOINT = 32;

/**
 * Outcomes written at once: a batch's are written as they come, this many a statement, so that a
 * crash sends again (the lease having run out) at most this many that had already arrived, plus
 * those in flight.
 */
const SETTLE_EVERY = 16;

/**
 * The least time between two claims: wake-ups come with every group of events stored, on any
 * instance, and a claim is a statement; within this they are one.
 */
const CLAIM_GAP_MS = 10;

/**
 * How long stopping waits for the batches in flight before it leaves them: an endpoint that hangs
 * would hold a shutdown for two attempt timeouts. What is left is sent again once its lease runs
 * out, by another instance or this one restarted (at least once, with the same `webhook-id`).
 */
const STOP_WAIT_MS = 5_000;

/** Outcomes written on this instance between two vacuums of the deliveries' table (the repository's `vacuumDeliveries`). */
const TIDY_EVERY = 10_000;

/** Endpoints whose connections are kept alive at once; past it, those of the endpoint used longest ago are closed. */
const MAX_AGENTS = 256;

/** What happens when the service turns an endpoint off (the activity entry, the owner's mail). */
export type OnDisabled = (endpoints: DisabledEndpoint[]) => Promise<void>;

/** The wait before retry `n` (1 for the first), with up to 10 % more at random so retries of many deliveries spread out. */
export function retryDelay(scheduleMs: number[], n: number): number | undefined {
  const base = scheduleMs[n - 1];
  return base === undefined ? undefined : Math.round(base * (1 + Math.random() * 0.1));
}

/** What a deliverer is built with (services.ts). */
export interface DelivererParts {
  db: Pick<Database, 'orm'>;
  settings: WebhookSettings;
  logger: Logger;
  onDisabled: OnDisabled;
  /** How an `event.created` delivery shows its event. */
  shapes: Pick<ChangeShapes, 'event'>;
}

export class Deliverer {
  private readonly busy = new Set<string>();
  /** Endpoints whose last batch failed without a success: claimed one delivery at a time (at most `MAX_AGENTS` remembered). */
  private readonly struggling = new Set<string>();
  private inFlight = 0;
  private readonly batches = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  /** The cycle running, if one is. */
  private cycling: Promise<void> | undefined;
  private again = false;
  private lastClaim = 0;
  /** Outcomes written since the last vacuum, and the vacuum running, if one is. */
  private settledSinceTidy = 0;
  private tidying: Promise<void> | undefined;
  private soon: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Keep-alive connections per endpoint (every socket made through the guard), dropped when idle. */
  private readonly agents = new Map<string, { http: http.Agent; https: https.Agent }>();

  private readonly db: DelivererParts['db'];
  private readonly settings: WebhookSettings;
  private readonly logger: Logger;
  private readonly onDisabled: OnDisabled;
  private readonly shapes: DelivererParts['shapes'];

  constructor({ db, settings, logger, onDisabled, shapes }: DelivererParts) {
    this.db = db;
    this.settings = settings;
    this.logger = logger;
    this.onDisabled = onDisabled;
    this.shapes = shapes;
  }

  start(): this {
    this.timer = setInterval(() => this.wake(), this.settings.pollMs);
    this.timer.unref();
    this.wake();
    return this;
  }

  /** Looks for due deliveries now (or right after the cycle running). */
  wake(): void {
    if (this.stopped) return;
    if (this.cycling) {
      this.again = true;
      return;
    }
    const wait = this.lastClaim + CLAIM_GAP_MS - performance.now();
    if (wait > 0) {
      this.soon ??= setTimeout(() => {
        this.soon = undefined;
        this.wake();
      }, wait);
      return;
    }
    this.lastClaim = performance.now();
    this.cycling = this.cycle().finally(() => {
      this.cycling = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /**
   * Stops claiming, and waits for the batches in flight (those of a claim under way included) for
   * at most `STOP_WAIT_MS`; then closes every connection, which ends the attempts still waiting.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.soon);
    await this.cycling;
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.batches, this.tidying]),
      new Promise((resolve) => (waited = setTimeout(resolve, STOP_WAIT_MS))),
    ]);
    clearTimeout(waited);
    for (const agents of this.agents.values()) {
      agents.http.destroy();
      agents.https.destroy();
    }
  }

  /** The messages of queued deliveries, by delivery id, as the queue sends them (messages.ts `messagesOf`). */
  messagesOf(em: EntityManager, deliveries: Pick<ClaimedDelivery, 'id' | 'type' | 'eventId' | 'payload'>[]): Promise<Map<string, Message>> {
    return messagesOf(em, deliveries, this.shapes);
  }

  /** One attempt at `url` with `message`, outside the queue (the test operation, a retry now). */
  attempt(delivery: { id: string; createdAt: Date; url: string; format: ClaimedDelivery['format']; secrets: string[] }, message: Message) {
    const { body, headers } = requestFor(delivery.format, delivery, message, new Date());
    return send(delivery.url, body, headers, { rules: this.settings, timeoutMs: this.settings.timeoutMs });
  }

  private async cycle(): Promise<void> {
    const free = this.settings.concurrency - this.inFlight;
    if (free <= 0) return;
    let claimed: ClaimedDelivery[];
    try {
      claimed = await claimDue(unitOfWork(this.db.orm), {
        skipEndpoints: [...this.busy],
        probeEndpoints: [...this.struggling],
        perEndpoint: BATCH,
        limit: free,
        leaseMs: 4 * this.settings.timeoutMs,
      });
    } catch (error) {
      this.logger.warn({ err: error }, 'webhook claim failed');
      return;
    }
    const byEndpoint = new Map<string, ClaimedDelivery[]>();
    for (const delivery of claimed) {
      const batch = byEndpoint.get(delivery.endpointId);
      if (batch) batch.push(delivery);
      else byEndpoint.set(delivery.endpointId, [delivery]);
    }
    for (const [endpointId, batch] of byEndpoint) {
      this.busy.add(endpointId);
      this.inFlight += batch.length;
      let released = false;
      // Once its attempts are done, the endpoint may be claimed for again while the last outcomes are written.
      const release = () => {
        if (released) return;
        released = true;
        this.busy.delete(endpointId);
        this.inFlight -= batch.length;
        this.wake();
      };
      const running: Promise<void> = this.deliver(batch, release)
        .catch((error: unknown) => this.logger.warn({ err: error }, 'webhook batch failed; its leases will run out'))
        .finally(() => {
          release();
          this.batches.delete(running);
        });
      this.batches.add(running);
    }
    // As many as asked for: more may be due.
    if (claimed.length === free) this.again = true;
  }

  /** Sends one endpoint's batch, writing its outcomes as they come (`SETTLE_EVERY` a statement, one statement at a time). */
  private async deliver(batch: ClaimedDelivery[], attemptsDone: () => void): Promise<void> {
    const em = unitOfWork(this.db.orm);
    const messages = await this.messagesOf(em, batch);
    const agents = this.agentsFor(batch[0]!.endpointId);
    const outcomes: Outcome[] = [];
    let unwritten: Outcome[] = [];
    let writing = Promise.resolve();
    const write = () => {
      const chunk = unwritten;
      unwritten = [];
      writing = writing.then(async () => {
        const disabled = await settle(em, chunk, this.settings.disableAfterMs);
        if (disabled.length > 0) await this.onDisabled(disabled);
        this.tidyAfter(chunk.length);
      });
    };
    let next = 0;
    const worker = async () => {
      while (next < batch.length) {
        const delivery = batch[next++]!;
        const outcome = await this.send(delivery, messages.get(delivery.id), agents);
        outcomes.push(outcome);
        unwritten.push(outcome);
        if (unwritten.length >= SETTLE_EVERY) write();
      }
    };
    await Promise.all(Array.from({ length: Math.min(PER_ENDPOINT, batch.length) }, worker));
    this.remember(batch[0]!.endpointId, outcomes);
    if (unwritten.length > 0) write();
    attemptsDone();
    await writing;
  }

  /** One attempt at a claimed delivery, with its message (none: its event is no longer stored). */
  private async send(
    delivery: ClaimedDelivery,
    message: Message | undefined,
    agents: { http: http.Agent; https: https.Agent },
  ): Promise<Outcome> {
    const at = new Date().toISOString();
    if (!message) {
      // The event's feed was deleted, or retention took it: there is nothing left to send.
      const entry = { at, status_code: null, duration_ms: 0, body: null, error: 'the event is no longer stored' };
      return { id: delivery.id, attempt: delivery.attempt, entry, delivered: false, gone: false, retryAt: null };
    }
    const { body, headers } = requestFor(delivery.format, delivery, message, new Date());
    const result = await send(delivery.url, body, headers, { rules: this.settings, timeoutMs: this.settings.timeoutMs, agents });
    return outcomeOf(delivery, at, result, this.settings.retryScheduleMs);
  }

  /** Vacuums the deliveries' table once `TIDY_EVERY` outcomes were written here, one vacuum at a time; a failure is logged. */
  private tidyAfter(settled: number): void {
    this.settledSinceTidy += settled;
    if (this.settledSinceTidy < TIDY_EVERY || this.tidying) return;
    this.settledSinceTidy = 0;
    this.tidying = vacuumDeliveries(unitOfWork(this.db.orm))
      .catch((error: unknown) => this.logger.warn({ err: error }, 'webhook deliveries vacuum failed'))
      .finally(() => (this.tidying = undefined));
  }

  /** Whether the endpoint is probed one delivery at a time from now on: a batch with failures and no success. */
  private remember(endpointId: string, outcomes: Outcome[]): void {
    this.struggling.delete(endpointId);
    if (outcomes.some((o) => o.delivered) || outcomes.length === 0) return;
    if (this.struggling.size >= MAX_AGENTS) this.struggling.delete(this.struggling.values().next().value!);
    this.struggling.add(endpointId);
  }

  /** The endpoint's agents, kept for the `MAX_AGENTS` endpoints used last (a Map keeps its order of insertion). */
  private agentsFor(endpointId: string): { http: http.Agent; https: https.Agent } {
    let agents = this.agents.get(endpointId);
    if (agents) this.agents.delete(endpointId);
    else {
      const [oldest] = this.agents;
      if (oldest && this.agents.size >= MAX_AGENTS) {
        this.agents.delete(oldest[0]);
        oldest[1].http.destroy();
        oldest[1].https.destroy();
      }
      const options = {
        keepAlive: true,
        maxSockets: PER_ENDPOINT,
        timeout: this.settings.timeoutMs,
        lookup: guardedLookup(this.settings) as never,
      };
      agents = { http: new http.Agent(options), https: new https.Agent(options) };
    }
    this.agents.set(endpointId, agents);
    return agents;
  }
}

/** An attempt's outcome: a 2xx delivers; a 410 fails for good and turns the endpoint off; anything else waits for the next retry, if any. */
export function outcomeOf(
  delivery: Pick<ClaimedDelivery, 'id' | 'attempt'>,
  at: string,
  result: AttemptResult,
  scheduleMs: number[],
): Outcome {
  const entry = logEntry(at, result);
  const succeeded = delivered(result);
  const gone = result.statusCode === 410;
  const wait = succeeded || gone ? undefined : retryDelay(scheduleMs, delivery.attempt);
  return {
    id: delivery.id,
    attempt: delivery.attempt,
    entry,
    delivered: succeeded,
    gone,
    retryAt: wait === undefined ? null : new Date(Date.now() + wait),
  };
}
