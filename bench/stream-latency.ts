/**
 * Stream latency: a publish on instance A, its receipt on a live stream from instance B on the same
 * database, one event at a time and then under the single-publish scenario's load.
 */
import path from 'node:path';
import { load, percentile } from './load.js';
import { startService, type Child } from './processes.js';
import type { Results } from './report.js';
import { json, logFile, round, say, sleep, type BenchRun } from './run.js';
import type { Fixture } from './seed.js';

/** Milliseconds on one clock shared by the publishers and the stream readers of this process. */
const clock = () => performance.timeOrigin + performance.now();

/**
 * Reads a project's live stream from `base` until `signal` aborts, telling `onEvent` each event's
 * data and the moment its message was parsed.
 */
async function readStream(
  base: string,
  namespace: string,
  token: string,
  signal: AbortSignal,
  onEvent: (data: { event: string; tags: Record<string, unknown>; created_at: string }, at: number) => void,
): Promise<() => Promise<void>> {
  const response = await fetch(`${base}/v1/projects/${namespace}/events/stream`, { headers: { authorization: `Bearer ${token}` }, signal });
  if (response.status !== 200 || !response.body) throw new Error(`stream: ${response.status}`);
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        const at = clock();
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = message.split('\n').find((line) => line.startsWith('data: '));
          if (data) onEvent(JSON.parse(data.slice(6)) as { event: string; tags: Record<string, unknown>; created_at: string }, at);
        }
      }
    } catch {
      // aborted
    }
  })();
  return () => reading;
}

const sortedRound = (values: number[]) => values.sort((x, y) => x - y);

/**
 * Publish on A, receive on a stream from a second instance B on the same database: first 300
 * events one after another, then while 50 connections publish to the project as fast as they can
 * (the single-publish scenario's load), with a stream on each instance; each event carries the
 * moment its request was built, so every receipt gives a delivery latency.
 */
export async function streamLatency(
  run: BenchRun,
  a: Child,
  env: Record<string, string>,
  fixture: Fixture,
  token: string,
  children: Child[],
): Promise<Results['stream']> {
  const { seconds, connections } = run;
  const b = await startService('B', { ...env, DATA_DIR: path.join(run.outDir, 'data-b') }, logFile(run, 'service-b'));
  children.push(b);
  const namespace = fixture.stream.namespace;

  const quiet = new AbortController();
  const received = new Map<string, number>();
  const stopQuiet = await readStream(b.url, namespace, token, quiet.signal, (data, at) => received.set(data.event, at));
  await sleep(300);
  const events = 300;
  const sent = new Map<string, number>();
  const publishTimes: number[] = [];
  for (let i = 0; i < events; i++) {
    const name = `latency ${i}`;
    const started = clock();
    sent.set(name, started);
    await json(`${a.url}/v1/projects/${namespace}/feeds/general/events`, 'POST', { event: name, tags: { i } }, token);
    publishTimes.push(clock() - started);
    await sleep(5);
  }
  const deadline = performance.now() + 10_000;
  while (received.size < events && performance.now() < deadline) await sleep(20);
  quiet.abort();
  await stopQuiet();
  const latencies = sortedRound([...sent].filter(([name]) => received.has(name)).map(([name, at]) => received.get(name)! - at));
  if (latencies.length < events) throw new Error(`stream: received ${latencies.length} of ${events} events`);

  const busy = new AbortController();
  const delivered: number[][] = [[], []];
  const sinceStored: number[] = [];
  const readers = await Promise.all(
    [a, b].map((instance, i) =>
      readStream(instance.url, namespace, token, busy.signal, (data, at) => {
        delivered[i]!.push(at - Number(data.tags.sent));
        sinceStored.push(at - Date.parse(data.created_at));
      }),
    ),
  );
  await sleep(300);
  let n = 0;
  const publishing = await load(a.url, {
    connections,
    seconds,
    next: () => ({
      method: 'POST',
      path: `/v1/projects/${namespace}/feeds/general/events`,
      headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify({ event: `under load ${n++}`, tags: { sent: clock() } }),
    }),
  });
  await sleep(1_000);
  busy.abort();
  for (const stop of readers) await stop();
  await b.stop();
  const underLoad = sortedRound(delivered.flat());
  const stored = sortedRound(sinceStored);
  const result = {
    events,
    p50: round(percentile(latencies, 50)),
    p99: round(percentile(latencies, 99)),
    max: round(latencies.at(-1)!),
    publishP50: round(percentile(sortedRound(publishTimes), 50)),
    underLoad: {
      publishRps: publishing.rps,
      publishP99: publishing.p99,
      received: delivered.map((list) => list.length),
      p50: round(percentile(underLoad, 50)),
      p99: round(percentile(underLoad, 99)),
      max: round(underLoad.at(-1)!),
      storedP50: round(percentile(stored, 50)),
      storedP99: round(percentile(stored, 99)),
    },
  };
  say(
    `Stream latency A → B over ${events} events: p50 ${result.p50} ms, p99 ${result.p99} ms, max ${result.max} ms (publish alone p50 ${result.publishP50} ms)`,
  );
  say(
    `Stream latency while ${connections} connections publish (${publishing.rps} events/s, publish p99 ${publishing.p99} ms), streams on A and B ` +
      `(${result.underLoad.received.join(' + ')} events received), from the publish request's start: p50 ${result.underLoad.p50} ms, p99 ${result.underLoad.p99} ms, ` +
      `max ${result.underLoad.max} ms; from the event's storage (created_at): p50 ${result.underLoad.storedP50} ms, p99 ${result.underLoad.storedP99} ms`,
  );
  return result;
}
