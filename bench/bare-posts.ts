/**
 * The least a webhook delivery can cost on this machine (bench/webhooks.ts runs it in a process of
 * its own): `--count` POSTs of one request, as the service sent it, to `--url` over keep-alive
 * connections with `--in-flight` at once, and nothing else (no database, no signature, no log).
 * Prints its own CPU µs per POST measured, and how many it sent in all (warm-up included), as JSON on
 * the last line.
 *
 * The request comes on standard input as JSON `{ body, headers }`.
 */
import http from 'node:http';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: { url: { type: 'string' }, count: { type: 'string', default: '20000' }, 'in-flight': { type: 'string', default: '32' } },
});
const target = new URL(args.url!);
const count = Number(args.count);
const inFlight = Number(args['in-flight']);
const chunks: Buffer[] = [];
for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
const { body, headers } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { body: string; headers: Record<string, string> };
const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight });

const post = () =>
  new Promise<void>((resolve, reject) => {
    const request = http.request(target, { method: 'POST', agent, headers }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`the receiver answered ${response.statusCode}`));
      response.resume().on('end', resolve);
    });
    request.on('error', reject);
    request.end(body);
  });

async function posts(n: number): Promise<void> {
  let sent = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (sent++ < n) await post();
    }),
  );
}

const warmup = Math.min(2_000, count);
await posts(warmup); // connections made and code warmed before the measure
const before = process.cpuUsage();
await posts(count);
const spent = process.cpuUsage(before);
agent.destroy();
process.stdout.write(`${JSON.stringify({ micros: (spent.user + spent.system) / count, posts: warmup + count })}\n`);
