/** bench/results.json and the generated tables of BENCHMARKS.md. */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { LoadResult } from './load.js';
import { root } from './processes.js';
import type { FixedCost } from './fixed-cost.js';
import type { RoutingResult } from './routing.js';

export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  postgres: string;
  os: string;
  loadBefore: number[];
  loadAfter?: number[];
}

export interface ScenarioResult extends LoadResult {
  name: string;
  label: string;
  /** The scenario the ratios are taken against (a baseline), if any. */
  baseline?: string;
  ratio?: { rps: number; p99: number };
  /** Peak RSS of the process under load during the scenario, MiB. */
  rssMiB?: number;
  note?: string;
}

/** CPU time per request, µs: the process under load, and PostgreSQL's processes. */
export interface CpuPerRequest {
  node: number;
  postgres: number;
}

export interface Results {
  when: string;
  section: string;
  options: { seconds: number; warmup: number; connections: number };
  machine: Machine;
  seed: { counts: Record<string, number>; ms: number };
  scenarios: ScenarioResult[];
  stream?: {
    events: number;
    p50: number;
    p99: number;
    max: number;
    publishP50: number;
    /** While the single-publish load runs against A, streams on A and B (absent from runs before it was measured). */
    underLoad?: {
      publishRps: number;
      publishP99: number;
      received: number[];
      /** From the start of the publish request. */
      p50: number;
      p99: number;
      max: number;
      /** From the event's `created_at` (set just before its insert), to the millisecond. */
      storedP50: number;
      storedP99: number;
    };
  };
  /** The project read and its baseline in alternating rounds: each pair's ratios, and their medians. */
  interleaved?: {
    seconds: number;
    rounds: {
      baselineRps: number;
      serviceRps: number;
      rps: number;
      p99: number;
      cpuMicros?: Record<'baseline' | 'service', CpuPerRequest>;
    }[];
    medianRps: number;
    medianP99: number;
    /** CPU µs per request, medians over the rounds (absent from runs before it was measured). */
    cpuMicrosMedian?: Record<'baseline' | 'service', CpuPerRequest>;
  };
  /** The same for increments of one insight against the hand-written increment (absent from runs before it was measured). */
  incrementInterleaved?: Results['interleaved'];
  /** The same for `GET /v1` against the bare Koa route (absent from runs before it was measured). */
  rootInterleaved?: Results['interleaved'];
  routing?: RoutingResult[];
  activityDepth?: {
    small: { records: number; depth: number; p50: number; rps: number };
    huge: { records: number; depth: number; p50: number; rps: number };
    ratio: number;
  };
  signupBurst?: {
    rounds: number;
    signups: number;
    burstMs: number;
    signupP50: number;
    /** GET /v1 at 50 connections, answers completed while the burst ran. */
    rootP99During: number;
    rootMaxDuring: number;
    rootP99Quiet: number;
    /** A single caller's GET /v1 every 10 ms during the burst. */
    probeP99During: number;
  };
  coldStart?: {
    /** What was started (runs before the compiled start recorded none: `node --import tsx server/src/main.ts`). */
    command?: string;
    runs: number[];
    median: number;
    /** A minimal HTTP server under the same runner: plain node, or tsx in the runs before the compiled start. */
    nodeOnlyMedian?: number;
    tsxOnlyMedian?: number;
    readyLogMedian: number;
    /** RSS right after the first answer, MiB (not in runs made before it was recorded). */
    rssMiB?: number;
    compiled?: { runs: number[]; median: number; rssMiB: number; compileMs: number };
  };
  rss?: { peakMiB: number; idleMiB: number };
  /** bench/fixed-cost.ts: GET /v1 in-process, the compiled app against a bare Koa app (absent from runs before it was measured). */
  fixedCost?: FixedCost;
}

const fmt = (n: number | undefined, digits = 1) => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(digits));

export function markdown(results: Results): string {
  const m = results.machine;
  const lines: string[] = [];
  lines.push(
    `Run of ${results.when}: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; PostgreSQL ${m.postgres} (same machine). ` +
      `Load average before: ${m.loadBefore.map((n) => n.toFixed(2)).join(' / ')}${m.loadAfter ? `, after: ${m.loadAfter.map((n) => n.toFixed(2)).join(' / ')}` : ''}. ` +
      `${results.options.connections} connections, ${results.options.seconds} s per scenario after ${results.options.warmup} s of warm-up.`,
    '',
    '| scenario | requests/s | p50 ms | p99 ms | non-2xx | ratio rps | ratio p99 | against | peak RSS MiB |',
    '|---|---:|---:|---:|---:|---:|---:|---|---:|',
  );
  for (const s of results.scenarios) {
    lines.push(
      `| ${s.label} | ${s.rps} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${s.non2xx + s.errors} | ${s.ratio ? s.ratio.rps.toFixed(2) + '×' : '–'} | ${s.ratio ? s.ratio.p99.toFixed(2) + '×' : '–'} | ${s.baseline ?? '–'} | ${s.rssMiB ?? '–'} |`,
    );
  }
  lines.push('');
  if (results.stream) {
    const s = results.stream;
    lines.push(
      `- **Stream latency** (publish on instance A → receipt on a stream from instance B, same database, ${s.events} events one after another): p50 ${fmt(s.p50, 2)} ms, p99 ${fmt(s.p99, 2)} ms, max ${fmt(s.max, 2)} ms (the publish request alone: p50 ${fmt(s.publishP50, 2)} ms).`,
    );
    const u = s.underLoad;
    if (u)
      lines.push(
        `- **Stream latency under load** (while ${results.options.connections} connections publish to the project on A as fast as they can, ${u.publishRps} events/s, publish p99 ${fmt(u.publishP99, 2)} ms; one stream on A and one on B, ${u.received.join(' + ')} events received): from the start of the publish request p50 ${fmt(u.p50, 2)} ms, p99 ${fmt(u.p99, 2)} ms, max ${fmt(u.max, 2)} ms; from the event's storage (\`created_at\`, just before its insert) p50 ${fmt(u.storedP50, 2)} ms, p99 ${fmt(u.storedP99, 2)} ms (target: p99 ≤ 100 ms).`,
      );
  }
  if (results.activityDepth) {
    const a = results.activityDepth;
    lines.push(
      `- **Activity page vs log length**: page of 50 at depth ${a.small.depth} of ${a.small.records} records: ${a.small.rps} req/s, p50 ${fmt(a.small.p50, 2)} ms; at depth ${a.huge.depth} of ${a.huge.records}: ${a.huge.rps} req/s, p50 ${fmt(a.huge.p50, 2)} ms; cost ratio (throughput small / huge) ${a.ratio.toFixed(2)} (target ≤ 1.5).`,
    );
  }
  const interleavedLine = (title: string, r: NonNullable<Results['interleaved']>, targetRps: string, targetP99?: string) =>
    `- **${title}, interleaved** (${r.rounds.length} rounds of ${r.seconds} s each, baseline then service, so that a shared machine's drift falls on both): requests/s ratio ${r.rounds.map((x) => `${x.rps.toFixed(2)}×`).join(', ')}, median **${r.medianRps.toFixed(2)}×** (target ${targetRps}); p99 ratio ${r.rounds.map((x) => `${x.p99.toFixed(2)}×`).join(', ')}, median **${r.medianP99.toFixed(2)}×**${targetP99 ? ` (target ${targetP99})` : ''}.${r.cpuMicrosMedian ? ` CPU per request, medians: baseline ${r.cpuMicrosMedian.baseline.node} µs in its process + ${r.cpuMicrosMedian.baseline.postgres} µs in PostgreSQL; service ${r.cpuMicrosMedian.service.node} + ${r.cpuMicrosMedian.service.postgres} µs.` : ''}`;
  if (results.rootInterleaved) lines.push(interleavedLine('GET /v1 against the bare Koa route', results.rootInterleaved, '≥ 0.6×'));
  if (results.interleaved)
    lines.push(interleavedLine('Project read against the Koa + pg baseline', results.interleaved, '≥ 0.8×', '≤ 1.25×'));
  if (results.incrementInterleaved)
    lines.push(
      interleavedLine(
        `Increments of one insight against the hand-written increment (${results.options.connections} connections on one insight)`,
        results.incrementInterleaved,
        '≥ 0.8×',
        '≤ 1.5×',
      ),
    );
  if (results.signupBurst) {
    const b = results.signupBurst;
    lines.push(
      `- **Sign-up burst** (${b.signups} concurrent sign-ups, bcrypt cost 10, ${b.rounds} rounds): the burst took ${fmt(b.burstMs, 0)} ms (sign-up p50 ${fmt(b.signupP50, 0)} ms); ` +
        `GET /v1 at 50 connections, answers completed during the burst: p99 ${fmt(b.rootP99During, 2)} ms, max ${fmt(b.rootMaxDuring, 2)} ms (quiet: p99 ${fmt(b.rootP99Quiet, 2)} ms); ` +
        `one caller every 10 ms during the burst: p99 ${fmt(b.probeP99During, 2)} ms (target: p99 < 50 ms).`,
    );
  }
  if (results.coldStart) {
    const c = results.coldStart;
    const runner =
      c.nodeOnlyMedian === undefined
        ? `\`node --import tsx\` running a minimal HTTP server: median ${fmt(c.tsxOnlyMedian ?? NaN, 0)} ms`
        : `plain node running a minimal HTTP server: median ${fmt(c.nodeOnlyMedian, 0)} ms`;
    lines.push(
      `- **Cold start** (\`${c.command ?? 'node --import tsx server/src/main.ts'}\`, migrated database, spawn → first answer to GET /v1): median ${fmt(c.median, 0)} ms over ${c.runs.length} runs (${c.runs.map((n) => n.toFixed(0)).join(', ')}); the service's own \`ready\` log line (from main.ts's first line): median ${fmt(c.readyLogMedian, 0)} ms; ${runner} (target ≤ 1,500 ms)${c.rssMiB === undefined ? '' : `; RSS at the first answer ${c.rssMiB} MiB`}.`,
    );
    if (c.compiled)
      lines.push(
        `- **Compiled start** (proposal: \`tsc\` to JavaScript, then \`node server/src/main.js\`): median ${fmt(c.compiled.median, 0)} ms (${c.compiled.runs.map((n) => n.toFixed(0)).join(', ')}), RSS at the first answer ${c.compiled.rssMiB} MiB.`,
      );
  }
  if (results.rss)
    lines.push(
      `- **Resident memory** of instance A: ${results.rss.idleMiB} MiB after seeding and logins, peak ${results.rss.peakMiB} MiB under load over every scenario (target ≤ 200 MiB).`,
    );
  if (results.fixedCost) {
    const f = results.fixedCost;
    const service = f.service[0]!;
    lines.push(
      `- **Fixed cost of a request** (\`GET ${f.path}\` in-process, bench/fixed-cost.ts: the compiled app driven through Node's own request and response objects, no network, Node 20's promise hooks on as in the service; median of ${f.rounds} rounds of ${f.requests.toLocaleString('en')}): the service ${fmt(service.micros)} µs of CPU per request, a bare Koa app ${fmt(f.bareMicros)} µs (×${(service.micros / f.bareMicros).toFixed(2)}).`,
    );
  }
  if (results.routing) {
    lines.push(
      '',
      '| routing + validation, µs per request | full contract | one-route contract | ratio | openapi-backend matchOperation, full | one route |',
      '|---|---:|---:|---:|---:|---:|',
    );
    for (const r of results.routing) {
      lines.push(
        `| ${r.case} (${r.routes.full} vs ${r.routes.one} operations) | ${r.serviceFull} | ${r.serviceOne} | ${r.ratio.toFixed(2)} | ${r.openapiBackendMatchFull} | ${r.openapiBackendMatchOne} |`,
      );
    }
  }
  lines.push(
    '',
    `Seed: ${Object.entries(results.seed.counts)
      .map(([k, v]) => `${v.toLocaleString('en')} ${k}`)
      .join(', ')} in ${(results.seed.ms / 1000).toFixed(1)} s.`,
  );
  return lines.join('\n');
}

const SKELETON = `# Benchmarks

Written by \`npm run bench\` (scripts/bench.ts); the tables between the markers are regenerated on
every run, the text around them is kept.

<!-- bench:current:start -->
<!-- bench:current:end -->
`;

export function writeResults(results: Results): void {
  // The current run in results.json; a named section (a run before a change) beside it.
  const json = results.section === 'current' ? 'results.json' : `results-${results.section}.json`;
  writeFileSync(path.join(root, 'bench', json), JSON.stringify(results, null, 2) + '\n');
  const file = path.join(root, 'BENCHMARKS.md');
  let text = existsSync(file) ? readFileSync(file, 'utf8') : SKELETON;
  const start = `<!-- bench:${results.section}:start -->`;
  const end = `<!-- bench:${results.section}:end -->`;
  const block = `${start}\n${markdown(results)}\n${end}`;
  if (text.includes(start) && text.includes(end)) {
    text = text.slice(0, text.indexOf(start)) + block + text.slice(text.indexOf(end) + end.length);
  } else {
    text = `${text.trimEnd()}\n\n${block}\n`;
  }
  writeFileSync(file, text);
}
