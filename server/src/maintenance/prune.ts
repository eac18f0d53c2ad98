/**
 * Background maintenance: removes icons nothing refers to any more, `stripe_events` rows past
 * their retention, `Idempotency-Key`s past their lifetime, events older than
 * `EVENT_RETENTION_DAYS` (unless 0) and webhook deliveries settled more than a week ago, in bounded batches, every few minutes. At start, and then
 * before each run, it moves icon files an earlier release left in `DATA_DIR/icons` into the icon
 * store (storage/disk-icons.ts): every instance moves its own folder, whichever instance prunes.
 * On PostgreSQL one instance at a time prunes: each run first takes a session advisory lock on a
 * connection of its own, and an instance that finds it taken skips the run. (Pruning stays correct
 * if two runs ever overlap: the lock only spares the duplicate work.) The embedded database has a
 * single owning process, whose runs never overlap. A failed run or move is logged as a warning and
 * the next one tries again; nothing here ever stops the service.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { unitOfWork, type Database } from '../db/orm.js';
import { tryPruneLock } from '../db/prune-lock.js';
import {
  deleteEventsStoredBefore,
  deleteExpiredIdempotencyKeys,
  deleteSettledWebhookDeliveries,
  deleteStripeEventsReceivedBefore,
} from '../domain/retention.js';
import { moveDiskIcons } from '../storage/disk-icons.js';
import type { IconStore } from '../storage/icons.js';

const DAY_MS = 24 * 60 * 60_000;

export interface MaintenanceOptions {
  intervalMs: number;
  /** A temporary icon file of the disk store younger than this may be an older instance's write in progress. */
  tempGraceMs: number;
  /**
   * An icon stored or saved again within this time is kept even when nothing refers to it: the
   * transaction that saved it may not have committed yet.
   */
  iconGraceMs: number;
  /** Stripe retries a delivery for up to 3 days; an event id is kept well beyond, to recognise a redelivery. */
  stripeEventRetentionMs: number;
  /** Rows per batch, and batches per run, of icons and of Stripe event ids. */
  batchSize: number;
  maxBatches: number;
  /**
   * `Idempotency-Key`s per batch and batches per run, with the events' pause between two batches:
   * at most 200,000 a run, about 58 million a day at one run every 5 minutes (a credential at its
   * rate limit makes 864,000 a day). A key holds its answer, up to about 1.5 MiB: a batch stays
   * small enough to finish well within a statement's timeout even then.
   */
  keyBatchSize: number;
  keyMaxBatches: number;
  /**
   * Events per batch and batches per run (at most 1,000,000 events a run by default, about 290
   * million a day at one run every 5 minutes, well above what the service can take in), with a
   * pause between two batches so that publishers and readers are never kept waiting for long
   * (embedded, the database is a single session). What a publisher feels is the batch and the
   * pause, not the number of batches: measured on 10 million events, publishes during a run had a
   * p99 within 1.03–1.21× of those between runs.
   */
  eventBatchSize: number;
  eventMaxBatches: number;
  eventBatchPauseMs: number;
}

export const MAINTENANCE_DEFAULTS: MaintenanceOptions = {
  intervalMs: 5 * 60_000,
  tempGraceMs: 60_000,
  iconGraceMs: 60 * 60_000,
  stripeEventRetentionMs: 30 * 24 * 60 * 60_000,
  batchSize: 500,
  maxBatches: 20,
  keyBatchSize: 1_000,
  keyMaxBatches: 200,
  eventBatchSize: 5_000,
  eventMaxBatches: 200,
  eventBatchPauseMs: 50,
};

export interface PruneReport {
  /** False when another run (here, or on another instance) held the lock. */
  ran: boolean;
  icons: number;
  stripeEvents: number;
  idempotencyKeys: number;
  events: number;
  /** Webhook deliveries settled more than a week ago (domain/retention.ts `DELIVERY_LOG_MS`). */
  webhookDeliveries: number;
}

const SKIPPED: PruneReport = { ran: false, icons: 0, stripeEvents: 0, idempotencyKeys: 0, events: 0, webhookDeliveries: 0 };

export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private moving: Promise<void> | undefined;
  private running: Promise<PruneReport> | undefined;
  private stopped = false;
  /** Files of the icon folder already reported as left in place: each is logged once. */
  private readonly reported = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly icons: IconStore,
    private readonly logger: Logger,
    private readonly config: Pick<Config, 'databaseDirectUrl' | 'database' | 'eventRetentionDays' | 'dataDir'>,
    private readonly options: MaintenanceOptions = MAINTENANCE_DEFAULTS,
  ) {}

  /** Moves the icon files on disk into the store (waited for), then prunes every `intervalMs`. */
  async start(): Promise<this> {
    await this.moveDiskIcons();
    this.schedule();
    return this;
  }

  /**
   * Moves `DATA_DIR/icons` into the icon store; logs what moved and, once each, what was left. A
   * failure is logged, and the next run tries again.
   */
  moveDiskIcons(): Promise<void> {
    this.moving ??= this.moveOnce().finally(() => (this.moving = undefined));
    return this.moving;
  }

  private async moveOnce(): Promise<void> {
    const dir = path.join(this.config.dataDir, 'icons');
    try {
      const { moved, removed, left } = await moveDiskIcons(dir, this.icons, this.options.tempGraceMs);
      if (moved + removed > 0) this.logger.info({ moved, removed, dir }, 'icons moved from disk into the icon store');
      for (const { file, reason } of left) {
        if (this.reported.has(file)) continue;
        this.reported.add(file);
        this.logger.warn({ file, reason, dir }, 'file left in the icon folder');
      }
    } catch (error) {
      this.logger.warn({ err: error }, 'moving icons from disk failed');
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.moveDiskIcons()
        .then(() => this.pruneOnce())
        .then(
          (report) => {
            if (report.icons + report.stripeEvents + report.idempotencyKeys + report.events + report.webhookDeliveries > 0)
              this.logger.info(report, 'pruned');
          },
          (error: unknown) => this.logger.warn({ err: error }, 'pruning failed'),
        )
        .finally(() => this.schedule());
    }, this.options.intervalMs).unref();
  }

  /** One run, unless one is already under way here or on another instance (then `ran` is false). */
  async pruneOnce(): Promise<PruneReport> {
    if (this.running || this.stopped) return SKIPPED;
    this.running = this.run();
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  /** Ends the schedule and waits for a run or a move under way (a run stops at its next batch). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.allSettled([this.moving, this.running]);
  }

  private async run(): Promise<PruneReport> {
    const release = await this.lock();
    if (!release) return SKIPPED;
    try {
      const stripeEvents = await this.pruneStripeEvents();
      const idempotencyKeys = await this.pruneIdempotencyKeys();
      const events = await this.pruneEvents();
      const webhookDeliveries = await deleteSettledWebhookDeliveries(unitOfWork(this.db.orm), {
        batchSize: this.options.eventBatchSize,
        maxBatches: this.options.eventMaxBatches,
        pauseMs: this.options.eventBatchPauseMs,
        stopping: () => this.stopped,
      });
      const icons = await this.icons.prune({
        graceMs: this.options.iconGraceMs,
        batchSize: this.options.batchSize,
        maxBatches: this.options.maxBatches,
        stopping: () => this.stopped,
      });
      return { ran: true, icons, stripeEvents, idempotencyKeys, events, webhookDeliveries };
    } finally {
      await release();
    }
  }

  /** The lock's release, or undefined when another session holds it. */
  private async lock(): Promise<(() => Promise<void>) | undefined> {
    if (this.db.kind === 'embedded') return async () => {};
    return tryPruneLock(this.config.databaseDirectUrl!, this.config.database.connectTimeoutMs);
  }

  private pruneStripeEvents(): Promise<number> {
    const cutoff = new Date(Date.now() - this.options.stripeEventRetentionMs);
    return deleteStripeEventsReceivedBefore(unitOfWork(this.db.orm), cutoff, {
      batchSize: this.options.batchSize,
      maxBatches: this.options.maxBatches,
      stopping: () => this.stopped,
    });
  }

  /** Keys used more than a day ago (domain/idempotency.ts). */
  private pruneIdempotencyKeys(): Promise<number> {
    return deleteExpiredIdempotencyKeys(unitOfWork(this.db.orm), {
      batchSize: this.options.keyBatchSize,
      maxBatches: this.options.keyMaxBatches,
      pauseMs: this.options.eventBatchPauseMs,
      stopping: () => this.stopped,
    });
  }

  /** Events stored more than `eventRetentionDays` ago; none with a retention of 0 (kept forever). */
  private async pruneEvents(): Promise<number> {
    if (this.config.eventRetentionDays === 0) return 0;
    const cutoff = new Date(Date.now() - this.config.eventRetentionDays * DAY_MS);
    return deleteEventsStoredBefore(unitOfWork(this.db.orm), cutoff, {
      batchSize: this.options.eventBatchSize,
      maxBatches: this.options.eventMaxBatches,
      pauseMs: this.options.eventBatchPauseMs,
      stopping: () => this.stopped,
    });
  }
}
