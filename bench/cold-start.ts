/** Cold start: spawn → first answer of the service as `npm start` runs it, beside plain node's own start. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../tests/support/pg-cluster.js';
import { rssMiB, serviceCommand, startChild, startService } from './processes.js';
import type { Results } from './report.js';
import { logFile, median, round, say, type BenchRun } from './run.js';

/**
 * Spawn → first answer to GET /v1, on the migrated bench database, nothing else running, as
 * `npm start` runs the service once built (`serviceCommand()`), with plain node's own
 * start-up beside it.
 */
export async function coldStart(run: BenchRun, env: Record<string, string>): Promise<Results['coldStart']> {
  const runs: number[] = [];
  const ready: number[] = [];
  const rss: number[] = [];
  for (let i = 0; i < 5; i++) {
    const file = logFile(run, `cold-${i}`);
    const child = await startService(`cold-${i}`, { ...env, DATA_DIR: path.join(run.outDir, `data-cold-${i}`) }, file);
    runs.push(child.startMs);
    rss.push(rssMiB(child.pid) ?? NaN);
    await child.stop();
    const line = readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.includes('"msg":"ready"'));
    if (line) ready.push((JSON.parse(line) as { ms: number }).ms);
  }
  const node: number[] = [];
  for (let i = 0; i < 5; i++) {
    const port = await freePort();
    // The smallest program node can start that answers HTTP: node's own start-up cost.
    const child = await startChild({
      name: 'node-only',
      args: ['-e', `require('node:http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1')`],
      port,
      probePath: '/',
      logFile: logFile(run, 'node-only'),
    });
    node.push(child.startMs);
    await child.stop();
  }
  const result: NonNullable<Results['coldStart']> = {
    command: serviceCommand(),
    runs: runs.map((n) => round(n, 0)),
    median: round(median(runs), 0),
    readyLogMedian: ready.length ? median(ready) : NaN,
    nodeOnlyMedian: round(median(node), 0),
    rssMiB: round(median(rss), 0),
  };
  say(
    `Cold start: median ${result.median} ms (${result.runs.join(', ')}); ready line ${result.readyLogMedian} ms; node alone ${result.nodeOnlyMedian} ms; RSS at first answer ${result.rssMiB} MiB`,
  );
  return result;
}
