/**
 * Requests counted per caller in one-minute windows, in this instance's memory, with every
 * instance's counts added up in PostgreSQL in batches: no request waits on the database to be
 * counted, except one that finds its caller's local allowance spent.
 *
 * A caller's window starts with its first request and lasts a minute; the shared row's window
 * (db/rate-counts.ts) is the one every instance adopts once it has heard back from a batch. Each
 * caller's entry holds `synced`, the total of every instance as of this instance's last batch for
 * that caller, and `pending`, what this instance counted since. A request is let through while
 * `synced + pending < limit`. When `pending` reaches the allowance (a tenth of the limit, at least
 * one), the request waits for a batch, which adds `pending` to the shared total and brings back
 * the new one. Batches also go every `syncEveryMs` for whatever is pending.
 *
 * The bound (docs/limits.md): with N instances, a caller gets at most `limit + N × allowance` in a
 * window. Each instance lets a caller through at most `allowance` times beyond the last total it
 * learned, and that total already holds every other instance's batches. With one instance the
 * count is exact. While the shared store cannot be reached, each instance goes on counting alone,
 * so a caller still gets at most `limit` per instance.
 *
 * Entries of ended windows are dropped at each batch. There are at most `maxCallers` entries: past
 * that, the callers seen least recently with nothing pending are forgotten (a forgotten caller is
 * counted from the shared total again after its next batch).
 */
import type { CountDelta, CountTotal } from '../db/rate-counts.js';

export const WINDOW_MS = 60_000;

/** Where every instance's counts meet. */
export interface SharedCounts {
  add(deltas: CountDelta[], windowMs: number): Promise<Map<string, CountTotal>>;
  dropEnded(windowMs: number): Promise<void>;
}

export interface CounterOptions {
  limit: number;
  /** Undefined: this instance is the only one (the embedded database), and counts exactly alone. */
  shared?: SharedCounts;
  syncEveryMs?: number;
  maxCallers?: number;
  /** Told when a batch could not be written: the counts stay local until one is. */
  onSyncError?: (error: unknown) => void;
}

/** What a counted request learns: let through or not, what is left, and when the window ends. */
export interface Decision {
  allowed: boolean;
  limit: number;
  remaining: number;
  msBeforeReset: number;
}

interface Entry {
  /** When the caller's window ends, ms since the epoch. */
  end: number;
  synced: number;
  pending: number;
  /** What the batch in flight carries for this entry, taken off `pending` when it lands. */
  sending: number;
}

export class RateCounter {
  readonly limit: number;
  private readonly allowance: number;
  private readonly maxCallers: number;
  /** Least recently seen first (a Map keeps the order entries were set in). */
  private readonly entries = new Map<string, Entry>();
  private batch: Promise<void> | undefined;
  private lastDrop = 0;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly prefix: string,
    private readonly options: CounterOptions,
  ) {
    this.limit = options.limit;
    this.allowance = Math.max(1, Math.floor(options.limit / 10));
    this.maxCallers = options.maxCallers ?? 100_000;
    if (options.shared) {
      this.timer = setInterval(() => void this.sync(), options.syncEveryMs ?? 1000);
      this.timer.unref();
    }
  }

  /**
   * Counts one request of `caller`. Synchronous but for a request that finds this instance's
   * allowance spent: that one waits for a batch, then is judged by the new total (or, when the
   * batch could not be written, by the local count alone).
   */
  take(caller: string): Decision | Promise<Decision> {
    const entry = this.entryOf(caller, Date.now());
    if (this.options.shared && entry.pending >= this.allowance && entry.synced + entry.pending < this.limit) {
      return this.sync().then(() => {
        const now = Date.now();
        return this.decide(this.entryOf(caller, now), now);
      });
    }
    return this.decide(entry, Date.now());
  }

  /**
   * Stops the batches. What is pending is not sent: an instance that stops takes at most its
   * allowance per caller out of the count, for what is left of the window.
   */
  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private decide(entry: Entry, now: number): Decision {
    const allowed = entry.synced + entry.pending < this.limit;
    if (allowed) entry.pending++;
    return {
      allowed,
      limit: this.limit,
      remaining: Math.max(0, this.limit - entry.synced - entry.pending),
      msBeforeReset: Math.max(0, entry.end - now),
    };
  }

  private entryOf(caller: string, now: number): Entry {
    let entry = this.entries.get(caller);
    if (entry) this.entries.delete(caller);
    if (!entry || entry.end <= now) {
      if (this.entries.size >= this.maxCallers) this.forgetIdle();
      entry = { end: now + WINDOW_MS, synced: 0, pending: 0, sending: 0 };
    }
    this.entries.set(caller, entry);
    return entry;
  }

  private forgetIdle(): void {
    for (const [caller, entry] of this.entries) {
      if (this.entries.size < this.maxCallers) return;
      if (entry.pending === 0) this.entries.delete(caller);
    }
  }

  /** One batch at a time: a call while one is in flight waits for it, then sends what is left. */
  private sync(): Promise<void> {
    const next = (this.batch ?? Promise.resolve()).then(() => this.send());
    this.batch = next;
    void next.finally(() => {
      if (this.batch === next) this.batch = undefined;
    });
    return next;
  }

  private async send(): Promise<void> {
    const shared = this.options.shared!;
    const now = Date.now();
    if (now - this.lastDrop >= WINDOW_MS) {
      this.lastDrop = now;
      await shared.dropEnded(WINDOW_MS).catch((error: unknown) => this.options.onSyncError?.(error));
    }
    const carried: [string, Entry][] = [];
    for (const [caller, entry] of this.entries) {
      // What was counted in an ended window no longer limits anyone.
      if (entry.end <= now) this.entries.delete(caller);
      else if (entry.pending > 0) {
        entry.sending = entry.pending;
        carried.push([caller, entry]);
      }
    }
    if (carried.length === 0) return;
    try {
      const totals = await shared.add(
        carried.map(([caller, entry]) => ({ key: `${this.prefix}:${caller}`, add: entry.sending })),
        WINDOW_MS,
      );
      for (const [caller, entry] of carried) {
        const total = totals.get(`${this.prefix}:${caller}`);
        entry.pending -= entry.sending;
        entry.sending = 0;
        if (total) {
          entry.synced = total.points;
          entry.end = total.expire;
        }
      }
    } catch (error) {
      for (const [, entry] of carried) entry.sending = 0;
      this.options.onSyncError?.(error);
    }
  }
}
