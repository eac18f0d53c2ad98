/**
 * Whether requests keep the process saturated, for work that can wait to yield to them (the webhook
 * deliverer, webhooks/deliverer.ts). Saturated means both, over the last window of `WINDOW_MS`: the
 * event loop was busy at least `BUSY_UTILIZATION` of the time, and requests kept arriving (at least
 * `MIN_REQUESTS` in the window). Either alone is not enough: a backlog of deliveries keeps the loop
 * busy by itself, with nothing to yield to; a steady trickle of requests leaves the loop idle.
 */
import { performance, type EventLoopUtilization } from 'node:perf_hooks';

const WINDOW_MS = 100;
const BUSY_UTILIZATION = 0.9;
/** 10 in a window of 100 ms: 100 requests a second. */
const MIN_REQUESTS = 10;

export interface GaugeClock {
  now(): number;
  /** The loop's utilization since `since` (Node's `performance.eventLoopUtilization`). */
  utilization(since?: EventLoopUtilization): EventLoopUtilization;
}

const nodeClock: GaugeClock = {
  now: () => performance.now(),
  utilization: (since) => performance.eventLoopUtilization(since),
};

export class LoadGauge {
  private windowStart: number;
  private windowUtilization: EventLoopUtilization;
  private requests = 0;
  private saturatedNow = false;

  constructor(private readonly clock: GaugeClock = nodeClock) {
    this.windowStart = clock.now();
    this.windowUtilization = clock.utilization();
  }

  /** Called for every request as it arrives. */
  noteRequest(): void {
    this.requests += 1;
  }

  /** The verdict on the last full window; a new window starts once the current one is `WINDOW_MS` old. */
  saturated(): boolean {
    const now = this.clock.now();
    if (now - this.windowStart >= WINDOW_MS) {
      const busy = this.clock.utilization(this.windowUtilization).utilization;
      // A window may be longer when nobody asked: the requests are counted at their rate.
      this.saturatedNow = busy >= BUSY_UTILIZATION && (this.requests * WINDOW_MS) / (now - this.windowStart) >= MIN_REQUESTS;
      this.windowStart = now;
      this.windowUtilization = this.clock.utilization();
      this.requests = 0;
    }
    return this.saturatedNow;
  }
}
