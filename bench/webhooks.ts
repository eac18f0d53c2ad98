/**
 * `npm run bench:webhooks` (`npx tsx bench/webhooks.ts`): the webhooks' figures, on PostgreSQL.
 *
 * On the server of the admin URL it creates a fresh database `sb_webhooks_<ts>`, builds and starts
 * the service as users run it (bench/processes.ts), with `WEBHOOK_ALLOW_HTTP` and
 * `WEBHOOK_ALLOW_PRIVATE` so that it may deliver to receivers on this machine, seeds a few accounts
 * and projects (bench/seed.ts), and runs receivers in this process (`node:http`): one that answers
 * 200 at once, one that never answers. Then, in one run:
 *
 * 1. **Publishing with an endpoint subscribed**: autocannon publishes single events to a project
 *    without endpoints and to one with an endpoint (at the fast receiver), in alternating rounds of
 *    `--seconds` after 3 s of each unmeasured, so that a machine's drift falls on both; the ratio
 *    of their requests a second, and the CPU each process spent per publish. Beside it, the ratio's
 *    ceiling on this machine: what one bare POST of the same request and its answer cost
 *    (bench/bare-posts.ts), added to a plain publish.
 *    Each round starts with the endpoint's queue empty; what a subscribed round leaves queued (the
 *    deliverer falling behind the publishing) and how long it takes to go out after are reported
 *    beside the ratio.
 * 2. **Delivery throughput**: the subscribed endpoint's backlog drained, `recover` queues the
 *    events of the rounds for it at once (up to 10,000); deliveries a second from the answer to the
 *    last arrival, and the CPU each process spent per delivery.
 * 3. **Storage to delivery** at `--rate` events a second (open loop, one event a request) for
 *    `--seconds`: each event's arrival at the receiver minus its `created_at`, p50 and p99.
 * 4. **Beside a hanging endpoint**: the same, to a project with two endpoints, one at the receiver
 *    that never answers (each attempt waits out `WEBHOOK_TIMEOUT_MS`, 15 s), for at least 20 s: the
 *    other endpoint's p99.
 *
 * The receivers share this process with the load generator, on the same machine as the service and
 * the database: the figures are a floor, and ratios from one run are what to compare. Prints the
 * report and writes it into bench/webhooks-results.md between its markers.
 *
 * Options: --admin-url URL; --seconds S (default 10); --rounds N (default 3); --connections N
 * (default 20); --rate N (default 500); --no-write; --keep-db; --profile (the service runs with
 * `--cpu-prof`; its profile is written in the run's temporary folder when it stops, and printed).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freshDatabase } from '../tests/support/pg-cluster.js';
import { loadAverage, machine, writeGeneratedBlock } from './bulk.js';
import { load, percentile } from './load.js';
import { buildService, cpuMicros, cpuSpent, postgresPids, root, startService } from './processes.js';
import { json, median, round, sleep } from './run.js';
import { seed } from './seed.js';
import { Webhook } from 'standardwebhooks';

const { values: args } = parseArgs({
  options: {
    'admin-url': { type: 'string' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '20' },
    rate: { type: 'string', default: '500' },
    'no-write': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
  },
});
const adminUrl = args['admin-url'] ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const connections = Number(args.connections);
const rate = Number(args.rate);

/** Publishing to each project before the measured rounds. */
const WARMUP_SECONDS = 3;

const note = (text: string) => process.stderr.write(`${text}\n`);

/** Arrivals at the receivers, by path: each delivery's arrival time and its event's `created_at`. */
const arrivals = new Map<string, { at: number; createdAt: number }[]>();
/** The last request the service sent, as it came (the bare POSTs of the ceiling send it again). */
let lastRequest: { body: string; headers: Record<string, string> } | undefined;

/** `/hang…` never answers (the connection stays open until the service gives up); anything else is 200 at once. */
function startReceiver(): Promise<http.Server> {
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = Date.now();
      const path = req.url ?? '';
      if (path.startsWith('/hang')) return;
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = JSON.parse(raw) as { data: { created_at: string } };
      if (path === '/subscribed') {
        const { host: _host, connection: _connection, ...headers } = req.headers as Record<string, string>;
        lastRequest = { body: raw, headers };
      }
      const list = arrivals.get(path) ?? [];
      list.push({ at, createdAt: Date.parse(body.data.created_at) });
      arrivals.set(path, list);
      res.writeHead(200).end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Publishes one event a request at `perSecond` for `ms`, open loop; resolves with the acknowledged count. */
async function publishAt(url: string, token: string, perSecond: number, ms: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const target = new URL(url);
  const body = JSON.stringify({ event: 'Paid', emoji: '💸', tags: { plan: 'pro' } });
  let acknowledged = 0;
  const sends: Promise<void>[] = [];
  const started = performance.now();
  for (let sent = 0; performance.now() - started < ms;) {
    const due = Math.floor(((performance.now() - started) / 1000) * perSecond);
    for (; sent < due; sent++) {
      sends.push(
        new Promise<void>((resolve) => {
          const request = http.request(
            target,
            { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } },
            (response) => {
              if (response.statusCode === 201) acknowledged++;
              response.resume().on('end', resolve);
            },
          );
          request.on('error', () => resolve());
          request.end(body);
        }),
      );
    }
    await sleep(2);
  }
  await Promise.all(sends);
  agent.destroy();
  return acknowledged;
}

/** CPU µs per unit of work, by process: the service, PostgreSQL (all its processes), this one (the load generator and the receivers). */
interface CpuShare {
  service: number;
  postgres: number;
  bench: number;
}
const total = (c: CpuShare) => c.service + c.postgres + c.bench;

const shareText = (c: CpuShare) => `${round(c.service, 0)} + ${round(c.postgres, 0)} + ${round(c.bench, 0)} = ${round(total(c), 0)} µs`;

/** Starts measuring the CPU the service, PostgreSQL and this process spend; `per(n)` divides what they spent since by `n`. */
function cpuMeter(servicePid: number): { per(n: number): CpuShare } {
  const postgres = postgresPids();
  const before = { service: cpuMicros([servicePid]), postgres: cpuMicros(postgres), bench: process.cpuUsage() };
  return {
    per(n) {
      const bench = process.cpuUsage(before.bench);
      return {
        service: cpuSpent(before.service, cpuMicros([servicePid])) / n,
        postgres: cpuSpent(before.postgres, cpuMicros(postgres)) / n,
        bench: (bench.user + bench.system) / n,
      };
    },
  };
}

/**
 * What one delivery costs at the least here: the last request the service sent, POSTed again
 * 20,000 times to this process's receiver by a bare sender (bench/bare-posts.ts: keep-alive, 32 at
 * once, no database, no signature); the sender's CPU and this process's (the receiver's) per POST.
 */
async function barePost(receiverUrl: string): Promise<{ sender: number; receiver: number }> {
  const request = lastRequest;
  if (!request) throw new Error('no delivery arrived to send again');
  const started = process.cpuUsage();
  const out = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'bench/bare-posts.ts', '--url', `${receiverUrl}/bare`],
      { cwd: root, encoding: 'utf8' },
      (error: Error | null, stdout: string) => (error ? reject(error) : resolve(stdout)),
    );
    child.stdin!.end(JSON.stringify(request));
  });
  const receiver = process.cpuUsage(started);
  const { micros, posts } = JSON.parse(out.trim().split('\n').at(-1)!) as { micros: number; posts: number };
  arrivals.delete('/bare');
  return { sender: micros, receiver: (receiver.user + receiver.system) / posts };
}

/** CPU µs per signature of `body` by the `standardwebhooks` package, in this process (what the service signs with). */
function signatureMicros(body: string): number {
  const webhook = new Webhook(`whsec_${randomBytes(24).toString('base64')}`);
  const count = 5_000;
  for (let i = 0; i < 500; i++) webhook.sign(`msg_${i}`, new Date(), body);
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) webhook.sign(`msg_${i}`, new Date(), body);
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / count;
}

/** Waits until `path` has had `count` arrivals (or `timeoutMs`); the arrivals. */
async function arrived(path: string, count: number, timeoutMs = 120_000): Promise<{ at: number; createdAt: number }[]> {
  const deadline = Date.now() + timeoutMs;
  while ((arrivals.get(path)?.length ?? 0) < count && Date.now() < deadline) await sleep(20);
  return arrivals.get(path) ?? [];
}

function latencies(list: { at: number; createdAt: number }[]): { p50: number; p99: number; max: number; n: number } {
  const sorted = list.map((a) => a.at - a.createdAt).sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? NaN, n: sorted.length };
}

async function main(): Promise<void> {
  const outDir = path.join(os.tmpdir(), `signalboard-bench-webhooks-${Date.now()}`);
  mkdirSync(outDir, { recursive: true });
  const description = await machine(adminUrl);
  note(description);
  const db = await freshDatabase(adminUrl, 'sb_webhooks');
  const receiver = await startReceiver();
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  note(`built the service in ${(buildService() / 1000).toFixed(1)} s`);
  const service = await startService(
    'webhooks',
    {
      DATABASE_URL: db.url,
      AUTH_RATE_LIMIT: '0',
      API_RATE_LIMIT: '0',
      LOG_LEVEL: 'warn',
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      DATA_DIR: path.join(outDir, 'data'),
    },
    path.join(outDir, 'service.log'),
    args.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(outDir, 'profiles')}`] : [],
  );
  if (args.profile) note(`the service's CPU profile: ${path.join(outDir, 'profiles')} (npx tsx bench/profile-summary.ts <file> 40)`);
  const report: string[] = [];
  try {
    const fixture = await seed(db.url, {
      // One user: every project is its own (owners are spread over the users).
      users: 1,
      projects: 3,
      membersPerProject: 1,
      feedsPerProject: 1,
      insightsPerProject: 0,
      largestActivity: 0,
      smallLog: 0,
      hugeLog: 0,
    });
    const owner = fixture.users[fixture.projects[0]!.members[0]!]!;
    const { data } = await json<{ data: { token: string } }>(`${service.url}/v1/auth/login`, 'POST', {
      login: owner.username,
      password: fixture.password,
    });
    const token = data.token;
    const owned = fixture.projects.filter((p) => p.members[0] === fixture.projects[0]!.members[0]);
    if (owned.length < 3) throw new Error('the seed gave the owner fewer than 3 projects');
    const [plain, subscribed, beside] = owned.map((p) => p.namespace) as [string, string, string];
    const feedOf = async (namespace: string) =>
      (await json<{ data: { items: { name: string }[] } }>(`${service.url}/v1/projects/${namespace}/feeds`, 'GET', undefined, token)).data
        .items[0]!.name;
    const publishUrl = async (namespace: string) => `${service.url}/v1/projects/${namespace}/feeds/${await feedOf(namespace)}/events`;
    const endpoint = async (namespace: string, receiverPath: string) =>
      (
        await json<{ data: { id: string } }>(
          `${service.url}/v1/projects/${namespace}/webhooks`,
          'POST',
          { url: `${receiverUrl}${receiverPath}` },
          token,
        )
      ).data.id;
    const subscribedEndpoint = await endpoint(subscribed, '/subscribed');
    const pendingOf = async (namespace: string, id: string) =>
      (
        await json<{ data: { pending_deliveries: number } }>(
          `${service.url}/v1/projects/${namespace}/webhooks/${id}`,
          'GET',
          undefined,
          token,
        )
      ).data.pending_deliveries;
    const drained = async (namespace: string, id: string) => {
      while ((await pendingOf(namespace, id)) > 0) await sleep(100);
    };

    // 1. Publishing with and without an endpoint subscribed.
    const body = JSON.stringify({ event: 'Paid', emoji: '💸', tags: { plan: 'pro' } });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    // Both paths warmed first (V8's compiler, the pools, the prepared statements), so that the first
    // plain round does not pay for what every later round finds ready.
    for (const namespace of [plain, subscribed]) {
      const path = new URL(await publishUrl(namespace)).pathname;
      await load(service.url, { connections, seconds: WARMUP_SECONDS, next: () => ({ method: 'POST', path, headers, body }) });
    }
    await drained(subscribed, subscribedEndpoint);
    const started = new Date();
    const rps = { plain: [] as number[], subscribed: [] as number[] };
    const cpu = { plain: [] as CpuShare[], subscribed: [] as CpuShare[] };
    /** What a subscribed round left queued at its end, and how long it took to go out after. */
    const backlogs: { left: number; drainMs: number }[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (const [kind, namespace] of [
        ['plain', plain],
        ['subscribed', subscribed],
      ] as const) {
        const url = await publishUrl(namespace);
        const meter = cpuMeter(service.pid);
        const result = await load(service.url, {
          connections,
          seconds,
          next: () => ({ method: 'POST', path: new URL(url).pathname, headers, body }),
        });
        rps[kind].push(result.rps);
        cpu[kind].push(meter.per(result.requests));
        note(`round ${round} ${kind}: ${result.rps.toFixed(0)} publishes/s, p99 ${result.p99.toFixed(1)} ms`);
        if (kind === 'subscribed') {
          // Every round starts with an empty queue: the next plain round never pays for this one's deliveries.
          const left = await pendingOf(subscribed, subscribedEndpoint);
          const draining = performance.now();
          await drained(subscribed, subscribedEndpoint);
          backlogs.push({ left, drainMs: performance.now() - draining });
          note(`  left queued: ${left}, delivered ${Math.round(performance.now() - draining)} ms after`);
        }
      }
    }
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const publishRatio = sum(rps.subscribed) / sum(rps.plain);
    const worstBacklog = backlogs.reduce((worst, b) => (b.left > worst.left ? b : worst), backlogs[0]!);
    const medianShare = (shares: CpuShare[]): CpuShare => ({
      service: median(shares.map((c) => c.service)),
      postgres: median(shares.map((c) => c.postgres)),
      bench: median(shares.map((c) => c.bench)),
    });
    const plainCpu = medianShare(cpu.plain);
    const subscribedCpu = medianShare(cpu.subscribed);
    const bare = await barePost(receiverUrl);
    const signing = signatureMicros(lastRequest!.body);
    const ceiling = total(plainCpu) / (total(plainCpu) + bare.sender + bare.receiver);
    const signedCeiling = total(plainCpu) / (total(plainCpu) + bare.sender + bare.receiver + signing);
    note(`a bare POST of a delivery: sender ${bare.sender.toFixed(0)} µs, receiver ${bare.receiver.toFixed(0)} µs of CPU`);

    // 2. Delivery throughput: 10,000 queued at once by a recovery.
    arrivals.delete('/subscribed');
    const deliveryMeter = cpuMeter(service.pid);
    const recoverStarted = Date.now();
    const recovered = await json<{ data: { queued: number } }>(
      `${service.url}/v1/projects/${subscribed}/webhooks/${subscribedEndpoint}/recover`,
      'POST',
      { since: started.toISOString() },
      token,
    );
    const queued = recovered.data.queued;
    const delivered = await arrived('/subscribed', queued);
    const deliveryRate = queued / ((delivered.at(-1)!.at - recoverStarted) / 1000);
    const deliveryCpu = deliveryMeter.per(queued);
    note(`delivered ${queued} in ${((delivered.at(-1)!.at - recoverStarted) / 1000).toFixed(2)} s`);
    await drained(subscribed, subscribedEndpoint);

    // 3. Storage to delivery at `rate` a second.
    arrivals.delete('/subscribed');
    const acknowledged = await publishAt(await publishUrl(subscribed), token, rate, seconds * 1000);
    const steady = latencies(await arrived('/subscribed', acknowledged));

    // 4. The same beside a hanging endpoint of the same project.
    await endpoint(beside, '/beside');
    await endpoint(beside, '/hang');
    const besideSeconds = Math.max(seconds, 20);
    const besideAcknowledged = await publishAt(await publishUrl(beside), token, rate, besideSeconds * 1000);
    const besideHang = latencies(await arrived('/beside', besideAcknowledged));

    const rows = [
      `| Publishing, one endpoint subscribed vs none (${rounds} rounds of ${seconds} s, ${connections} connections) | ${round(sum(rps.subscribed) / rounds, 0)} vs ${round(sum(rps.plain) / rounds, 0)} publishes/s: **${round(publishRatio)}×** | ≥ 0.9× |`,
      `| CPU per publish, median of the rounds: service + PostgreSQL + load generator and receiver | none subscribed ${shareText(plainCpu)}; one subscribed ${shareText(subscribedCpu)} | |`,
      `| The ratio's ceiling here: one bare POST of the same request and its answer (no database, no signature); with its signature by the \`standardwebhooks\` package | ${round(bare.sender, 0)} + ${round(bare.receiver, 0)} µs of CPU: at most **${round(ceiling)}×** for any deliverer that sends each event at once; + ${round(signing, 0)} µs to sign: **${round(signedCeiling)}×** | |`,
      `| Deliveries left queued at the end of a subscribed round (most of the ${rounds}); sent after | ${worstBacklog.left}; all sent ${round(worstBacklog.drainMs / 1000, 1)} s after | none |`,
      `| Delivery throughput, ${queued.toLocaleString('en')} queued at once, receiver answering at once | **${round(deliveryRate, 0)} deliveries/s**; CPU per delivery ${shareText(deliveryCpu)} | ≥ 2,000/s |`,
      `| Storage to delivery at ${rate} events/s for ${seconds} s (${steady.n} events) | p50 ${steady.p50} ms, **p99 ${steady.p99} ms**, max ${steady.max} ms | p99 ≤ 250 ms |`,
      `| The same, beside an endpoint that never answers (${besideSeconds} s, ${besideHang.n} events) | p50 ${besideHang.p50} ms, **p99 ${besideHang.p99} ms**, max ${besideHang.max} ms | p99 ≤ 250 ms |`,
    ];
    report.push(
      `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}: ${description}; load average before ${loadAverage().join(' ')}.`,
      '',
      '| Figure | Measured | Target |',
      '|---|---|---|',
      ...rows,
    );
    process.stdout.write(`${report.join('\n')}\n`);
    if (!args['no-write']) {
      writeGeneratedBlock(
        path.join(root, 'bench/webhooks-results.md'),
        { start: '<!-- webhooks:start -->', end: '<!-- webhooks:end -->' },
        report.join('\n'),
        '# Webhooks: measured figures\n\nWritten by `npm run bench:webhooks` (bench/webhooks.ts says how each figure is taken).',
      );
    }
  } finally {
    await service.stop();
    receiver.closeAllConnections();
    receiver.close();
    if (!args['keep-db']) await db.drop();
    rmSync(path.join(outDir, 'data'), { recursive: true, force: true });
  }
}

await main();
