/** A burst of sign-ups (bcrypt on its worker pool) and what it does to everyone else's GET /v1. */
import { percentile } from './load.js';
import type { Child } from './processes.js';
import type { Results } from './report.js';
import { json, median, round, say, sleep, type BenchRun } from './run.js';
import type { Fixture } from './seed.js';

/**
 * GET /v1 at 50 connections while 20 sign-ups run at once (bcrypt cost 10): the p99 of the answers
 * completed during the burst, and that of a single caller asking every 10 ms, which shows a
 * stalled event loop directly. Several rounds, answers pooled.
 */
export async function signupBurst(run: BenchRun, a: Child, fixture: Fixture): Promise<Results['signupBurst']> {
  const { connections } = run;
  const rounds = 3;
  const signups = 20;
  const during: number[] = [];
  const probe: number[] = [];
  const quiet: number[] = [];
  const burstTimes: number[] = [];
  const signupTimes: number[] = [];
  let invite = 0;
  for (let round = 0; round < rounds; round++) {
    const answers: { at: number; ms: number }[] = [];
    const { default: autocannon } = await import('autocannon');
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const instance = autocannon({ url: `${a.url}/v1`, connections, duration: 3 }, () => finish());
    instance.on('response', (_c: unknown, status: number, _b: number, ms: number) => {
      if (status === 200) answers.push({ at: performance.now(), ms });
    });
    await sleep(1_000);
    let probing = true;
    const prober = (async () => {
      while (probing) {
        const started = performance.now();
        await (await fetch(`${a.url}/v1`)).arrayBuffer();
        probe.push(performance.now() - started);
        await sleep(10);
      }
    })();
    const burstStart = performance.now();
    await Promise.all(
      Array.from({ length: signups }, async (_, i) => {
        const started = performance.now();
        const username = `burst_${round}_${i}_${Date.now() % 100000}`;
        await json(`${a.url}/v1/auth/signup`, 'POST', {
          username,
          email: `${username}@bench.example.com`,
          password: 'burst password 123',
          invite: fixture.invites[invite++],
        });
        signupTimes.push(performance.now() - started);
      }),
    );
    const burstEnd = performance.now();
    probing = false;
    await prober;
    burstTimes.push(burstEnd - burstStart);
    await finished;
    for (const answer of answers) {
      // An answer overlaps the burst if it was in flight at any point between its start and end.
      if (answer.at >= burstStart && answer.at - answer.ms <= burstEnd) during.push(answer.ms);
      else if (answer.at < burstStart - 100) quiet.push(answer.ms);
    }
  }
  const sorted = (xs: number[]) => xs.sort((x, y) => x - y);
  const result = {
    rounds,
    signups,
    burstMs: round(median(burstTimes), 0),
    signupP50: round(percentile(sorted(signupTimes), 50), 0),
    rootP99During: round(percentile(sorted(during), 99)),
    rootMaxDuring: round(sorted(during).at(-1) ?? NaN),
    rootP99Quiet: round(percentile(sorted(quiet), 99)),
    probeP99During: round(percentile(sorted(probe), 99)),
  };
  say(
    `Sign-up burst (${signups} at once, cost 10): ${result.burstMs} ms; GET /v1 p99 during it ${result.rootP99During} ms (max ${result.rootMaxDuring}, quiet p99 ${result.rootP99Quiet}); single caller p99 ${result.probeP99During} ms`,
  );
  return result;
}
