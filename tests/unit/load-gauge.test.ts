/**
 * The load gauge (server/src/load-gauge.ts) on its own, on a clock of the test's: saturated only
 * when, over a window of 100 ms, the event loop was busy at least 90 % of the time and requests
 * arrived at 100 a second or more; a verdict holds until the next window ends.
 */
import type { EventLoopUtilization } from 'node:perf_hooks';
import { expect } from 'chai';
import { LoadGauge, type GaugeClock } from '../../server/src/load-gauge.js';

/** A clock whose loop is busy `busy` of every millisecond that passes. */
class TestClock implements GaugeClock {
  at = 0;
  activeMs = 0;
  busy = 0;
  now(): number {
    return this.at;
  }
  utilization(since?: EventLoopUtilization): EventLoopUtilization {
    const idle = this.at - this.activeMs;
    if (!since) return { active: this.activeMs, idle, utilization: 0 };
    const active = this.activeMs - since.active;
    const total = active + idle - since.idle;
    return { active, idle: idle - since.idle, utilization: total > 0 ? active / total : 0 };
  }
  pass(ms: number): void {
    this.at += ms;
    this.activeMs += ms * this.busy;
  }
}

function window(gauge: LoadGauge, clock: TestClock, busy: number, requests: number, ms = 100): boolean {
  clock.busy = busy;
  for (let i = 0; i < requests; i++) gauge.noteRequest();
  clock.pass(ms);
  return gauge.saturated();
}

describe('unit: the load gauge', () => {
  it('is saturated when the loop was busy at least 90 % and requests arrived at 100 a second', () => {
    const clock = new TestClock();
    const gauge = new LoadGauge(clock);
    expect(gauge.saturated(), 'before any window').to.equal(false);
    expect(window(gauge, clock, 0.95, 10)).to.equal(true);
    expect(window(gauge, clock, 0.9, 50)).to.equal(true);
  });

  it('is not saturated by a busy loop without requests (a backlog of its own), nor by requests on an idle loop', () => {
    const clock = new TestClock();
    const gauge = new LoadGauge(clock);
    expect(window(gauge, clock, 1, 0)).to.equal(false);
    expect(window(gauge, clock, 1, 9)).to.equal(false);
    expect(window(gauge, clock, 0.5, 500)).to.equal(false);
    expect(window(gauge, clock, 0.89, 500)).to.equal(false);
  });

  it('keeps a verdict until its window ends, and counts requests at their rate over a longer window', () => {
    const clock = new TestClock();
    const gauge = new LoadGauge(clock);
    expect(window(gauge, clock, 1, 20)).to.equal(true);
    // 50 ms on: the window is not over, the verdict stands whatever happens in it.
    expect(window(gauge, clock, 0, 0, 50)).to.equal(true);
    // A window of 1 s: 99 requests are 99 a second, under the bar; 100 are not.
    expect(window(gauge, clock, 1, 99, 1_000)).to.equal(false);
    expect(window(gauge, clock, 1, 100, 1_000)).to.equal(true);
  });
});
