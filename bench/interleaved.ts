/** A scenario (the project read, an insight's increment) against its hand-written baseline in alternating rounds, with the CPU each side spent per request. */
import { load, type LoadRequest } from './load.js';
import { cpuMicros, cpuSpent, postgresPids, type Child } from './processes.js';
import type { Results } from './report.js';
import { median, round, say, type BenchRun } from './run.js';

/**
 * A scenario (`what`: the project read, or an increment of one insight) and its hand-written
 * baseline in alternating rounds (baseline, service, baseline, …), after both were warmed up by
 * their scenarios: drift of a shared machine (other processes,
 * CPU steal) then falls on both sides of each ratio instead of on one scenario. Each round also
 * counts the CPU time per request of the process under load and of PostgreSQL (its processes on
 * this machine, which serve only the process under load during its round): a steadier figure than
 * throughput on a noisy machine, and it says which side a difference comes from.
 */
export async function interleaved(
  run: BenchRun,
  service: Child,
  baseline: Child,
  next: () => LoadRequest,
  what = 'Project read',
): Promise<Results['interleaved']> {
  const { seconds, connections } = run;
  const rounds: NonNullable<Results['interleaved']>['rounds'] = [];
  const roundSeconds = Math.max(1, Math.round(seconds / 2));
  const measured = async (target: Child) => {
    const postgres = postgresPids();
    const before = { node: cpuMicros([target.pid]), postgres: cpuMicros(postgres) };
    const result = await load(target.url, { connections, seconds: roundSeconds, next });
    const perRequest = (spent: number) => round(spent / Math.max(1, result.requests), 0);
    return {
      result,
      cpu: {
        node: perRequest(cpuSpent(before.node, cpuMicros([target.pid]))),
        postgres: perRequest(cpuSpent(before.postgres, cpuMicros(postgres))),
      },
    };
  };
  for (let i = 0; i < 5; i++) {
    const base = await measured(baseline);
    const ours = await measured(service);
    rounds.push({
      baselineRps: base.result.rps,
      serviceRps: ours.result.rps,
      rps: round(ours.result.rps / base.result.rps),
      p99: round(ours.result.p99 / base.result.p99),
      cpuMicros: { baseline: base.cpu, service: ours.cpu },
    });
  }
  const cpuMedian = (side: 'baseline' | 'service', of: 'node' | 'postgres') => median(rounds.map((r) => r.cpuMicros![side][of]));
  const result = {
    seconds: roundSeconds,
    rounds,
    medianRps: median(rounds.map((r) => r.rps)),
    medianP99: median(rounds.map((r) => r.p99)),
    cpuMicrosMedian: {
      baseline: { node: cpuMedian('baseline', 'node'), postgres: cpuMedian('baseline', 'postgres') },
      service: { node: cpuMedian('service', 'node'), postgres: cpuMedian('service', 'postgres') },
    },
  };
  const cpu = result.cpuMicrosMedian;
  say(
    `${what} vs baseline, interleaved: ${rounds.map((r) => `${r.rps}× (p99 ${r.p99}×)`).join(', ')}; median ${result.medianRps}×, p99 ${result.medianP99}×`,
  );
  say(
    `  CPU per request (medians): baseline ${cpu.baseline.node} µs in node + ${cpu.baseline.postgres} µs in PostgreSQL; service ${cpu.service.node} + ${cpu.service.postgres} µs`,
  );
  return result;
}
