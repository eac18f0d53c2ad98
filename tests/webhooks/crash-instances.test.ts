/**
 * Webhook deliveries across a crash and across instances, on PostgreSQL (a service process has a
 * database of its own, which an embedded database's single owner cannot share):
 * - a service process SIGKILLed while it is sending, and started again on the same database: every
 *   event whose publication was acknowledged reaches the receiver at least once, each copy of an
 *   event with the same webhook-id, and every delivery row ends delivered; the duplicates the
 *   crash caused (deliveries sent but not yet written back, sent again once their lease ran out)
 *   are counted and printed;
 * - two service processes on one database delivering to one endpoint: every event exactly once,
 *   both processes sending some, and never one webhook-id in flight twice at once;
 * - a process SIGKILLed just after an endpoint answered 410 Gone, while the activity log cannot be
 *   written: the endpoint is never found turned off without its `webhook.disabled` entry.
 * The receiver tells the processes apart by the owner of each connection's client socket (Linux's
 * /proc); elsewhere only the overlap check says that no delivery was sent by both at once.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { expect } from 'chai';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { freshPostgresDatabase, secret } from '../support/harness.js';
import { callAt, expectData } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';

/** One request the receiver got: which delivery, which event, when it was in flight, and from which process. */
interface Copy {
  webhookId: string;
  body: string;
  headers: http.IncomingHttpHeaders;
  start: number;
  end: number | undefined;
  sender: number | undefined;
}

/**
 * A receiver that answers `status` (200) after `delayMs`, recording each request's start (its headers
 * arrived) and end (the answer written), and the process among `senders` that opened its connection.
 */
class SlowReceiver {
  readonly copies: Copy[] = [];
  status = 200;
  senders: number[] = [];
  /** Called with each request as it arrives, before it is answered. */
  onRequest: (copy: Copy) => void = () => {};
  private readonly senderOf = new WeakMap<Socket, number | undefined>();

  private constructor(
    private readonly server: http.Server,
    private readonly delayMs: number,
  ) {
    server.on('connection', (socket) => this.senderOf.set(socket, processOfPeer(this.port, socket.remotePort, this.senders)));
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = [];
      const start = performance.now();
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const copy: Copy = {
          webhookId: String(req.headers['webhook-id']),
          body: Buffer.concat(chunks).toString('utf8'),
          headers: req.headers,
          start,
          end: undefined,
          sender: this.senderOf.get(req.socket),
        };
        this.copies.push(copy);
        this.onRequest(copy);
        res.on('finish', () => (copy.end = performance.now()));
        res.on('error', () => {});
        setTimeout(() => res.writeHead(this.status, { 'content-type': 'text/plain' }).end('ok'), this.delayMs);
      });
    });
  }

  static async start(delayMs: number): Promise<SlowReceiver> {
    const server = http.createServer({ keepAlive: true });
    const receiver = new SlowReceiver(server, delayMs);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * Which of `pids` holds the client end of the connection from 127.0.0.1:`peerPort` to the
 * receiver's `port`: the socket's inode in /proc/net/tcp, looked for among each process's open
 * files. Undefined when none does, or without /proc.
 */
function processOfPeer(port: number, peerPort: number | undefined, pids: number[]): number | undefined {
  if (peerPort === undefined || pids.length === 0) return undefined;
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
  let inode: string | undefined;
  try {
    for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[1]?.endsWith(`:${hex(peerPort)}`) && fields[2]?.endsWith(`:${hex(port)}`)) inode = fields[9];
    }
  } catch {
    return undefined;
  }
  if (inode === undefined) return undefined;
  for (const pid of pids) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        try {
          if (readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`) return pid;
        } catch {
          // The descriptor closed meanwhile.
        }
      }
    } catch {
      // The process is gone.
    }
  }
  return undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntil<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(50);
  }
}

/** The environment of a service process on `databaseUrl` that may deliver to this machine over plain http. */
function serviceEnv(databaseUrl: string, overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    AUTH_RATE_LIMIT: '0',
    API_RATE_LIMIT: '0',
    CDN_RATE_LIMIT: '0',
    BCRYPT_ROUNDS: '4',
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_POLL_MS: '100',
    ...overrides,
  };
}

/** The first account, on the invite code a service on an empty database logs, with a project and an endpoint at `hookUrl`. */
async function firstProjectWithEndpoint(
  service: ServiceProcess,
  hookUrl: string,
): Promise<{ token: string; namespace: string; endpoint: { id: string; secret: string } }> {
  const line = await service.waitForLog((entry) => String(entry.msg).startsWith('Create the first account:'));
  const invite = new URL(String(line.msg).slice('Create the first account: '.length)).searchParams.get('invite')!;
  const signedUp = expectData(
    await callAt(service.url, 'POST', '/v1/auth/signup', undefined, {
      username: 'hooks_owner',
      email: 'hooks_owner@example.com',
      password: secret('correct horse battery'),
      invite,
    }),
    201,
    'sign-up',
  );
  const token = secret(signedUp.token as string);
  const { namespace } = await createProject(token, {}, service.url);
  const endpoint = expectData(await callAt(service.url, 'POST', projectPath(namespace, '/webhooks'), token, { url: hookUrl }), 201);
  return { token, namespace, endpoint };
}

/** The event id of a copy, from its body, whose Standard Webhooks signature must check with `signingSecret`. */
function eventIdOf(copy: Copy, signingSecret: string): string {
  const message = new Webhook(signingSecret).verify(copy.body, copy.headers as Record<string, string>) as {
    type: string;
    data: { id: string };
  };
  expect(message.type).to.equal('event.created');
  return message.data.id;
}

/** The copies of each event, by event id. */
function copiesByEvent(copies: Copy[], signingSecret: string): Map<string, Copy[]> {
  const byEvent = new Map<string, Copy[]>();
  for (const copy of copies) {
    const id = eventIdOf(copy, signingSecret);
    byEvent.set(id, [...(byEvent.get(id) ?? []), copy]);
  }
  return byEvent;
}

/** A statement on `databaseUrl`, on a connection of its own. */
async function query<T>(databaseUrl: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

/** Waits until no delivery of the database is pending and every endpoint's `pending` is 0; answers the states of its deliveries. */
async function settledDeliveries(databaseUrl: string, timeoutMs: number): Promise<{ id: string; event_id: string; state: string }[]> {
  return waitUntil(
    'every delivery settled and no endpoint pending',
    async () => {
      const rows = await query<{ id: string; event_id: string; state: string }>(
        databaseUrl,
        'select id, event_id, state from webhook_deliveries',
      );
      const [endpoints] = await query<{ pending: number }>(
        databaseUrl,
        'select coalesce(sum(pending), 0)::int as pending from webhook_endpoints',
      );
      return rows.every((r) => r.state !== 'pending') && endpoints!.pending === 0 ? rows : undefined;
    },
    timeoutMs,
  );
}

describe('webhooks: a crashed instance and two instances on one database', function () {
  this.timeout(60_000);
  const started: ServiceProcess[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  before(function () {
    if (!process.env.DATABASE_URL) {
      console.log('      (skipped: a service process needs a database of its own on a PostgreSQL server; run with DATABASE_URL)');
      this.skip();
    }
  });
  afterEach(async () => {
    for (const service of started.splice(0)) {
      if (service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGKILL');
      await service.exited;
    }
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const start = async (env: NodeJS.ProcessEnv) => {
    const service = await startServiceProcess(env);
    started.push(service);
    return service;
  };
  const freshDatabase = async (prefix: string) => {
    const fresh = await freshPostgresDatabase(process.env.DATABASE_URL!, prefix);
    cleanups.push(fresh.drop);
    return fresh.url;
  };

  it('delivers every acknowledged event at least once, with one webhook-id, after a SIGKILL in the middle of deliveries', async () => {
    const TOTAL = 300;
    const BATCH = 10;
    const KILL_AT = 90;
    const receiver = await SlowReceiver.start(20);
    cleanups.push(() => receiver.close());
    const databaseUrl = await freshDatabase('sb_hooks_crash');
    const env = serviceEnv(databaseUrl, { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,2s' });
    const first = await start(env);
    const { token, namespace, endpoint } = await firstProjectWithEndpoint(first, receiver.url);

    // Publishers send batches to whichever process is up; the receiver kills the first process
    // on the KILL_AT-th request it gets, while that request (and its batch's others) are unanswered.
    let target: string | undefined = first.url;
    const acknowledged = new Set<string>();
    const statuses: number[] = [];
    let n = 0;
    let acknowledgedAtKill = 0;
    let receivedAtKill = 0;
    receiver.onRequest = () => {
      if (receiver.copies.length !== KILL_AT || target === undefined) return;
      target = undefined;
      acknowledgedAtKill = acknowledged.size;
      receivedAtKill = receiver.copies.length;
      first.child.kill('SIGKILL');
    };
    const publisher = async () => {
      while (acknowledged.size < TOTAL) {
        const origin = target;
        if (origin === undefined) {
          await sleep(20);
          continue;
        }
        const events = Array.from({ length: BATCH }, () => ({ feed: 'general', event: `e${++n}` }));
        const answer = await callAt(origin, 'POST', projectPath(namespace, '/events'), token, { events }).catch(() => ({
          status: 0,
          json: undefined,
        }));
        statuses.push(answer.status);
        if (answer.status === 201)
          for (const event of (answer.json as { data: { items: { id: string }[] } }).data.items) acknowledged.add(event.id);
        await sleep(15);
      }
    };
    const publishing = Promise.all([publisher(), publisher()]);

    await waitUntil('the first process killed', () => (target === undefined ? true : undefined), 20_000);
    await first.exited;
    const second = await start(env);
    target = second.url;
    await publishing;

    // Every acknowledged event arrives; then every delivery is written back.
    await waitUntil(
      'every acknowledged event received',
      () => {
        const received = new Set(receiver.copies.map((c) => eventIdOf(c, endpoint.secret)));
        return [...acknowledged].every((id) => received.has(id)) ? true : undefined;
      },
      20_000,
    );
    const rows = await settledDeliveries(databaseUrl, 15_000);
    await sleep(300);
    expect(second.child.exitCode, 'the second process still runs').to.equal(null);

    expect(statuses.filter((s) => s !== 201 && s !== 0)).to.deep.equal([]);
    expect(acknowledgedAtKill, 'events acknowledged before the kill').to.be.greaterThan(0);
    expect(acknowledged.size - acknowledgedAtKill, 'events acknowledged after the restart').to.be.greaterThan(0);
    const byEvent = copiesByEvent(receiver.copies, endpoint.secret);
    const stored = await query<{ id: string }>(databaseUrl, 'select id from events');
    // Every stored event (the acknowledged ones, and any a publication cut off by the kill committed) has its delivery, delivered.
    expect(rows.map((r) => r.event_id).sort()).to.deep.equal(stored.map((e) => e.id).sort());
    expect(rows.filter((r) => r.state !== 'delivered')).to.deep.equal([]);
    expect(
      [...acknowledged].filter((id) => !byEvent.has(id)),
      'acknowledged events never received',
    ).to.deep.equal([]);
    expect(
      [...byEvent.keys()].filter((id) => !rows.some((r) => r.event_id === id)),
      'received events not stored',
    ).to.deep.equal([]);
    const deliveryOf = new Map(rows.map((r) => [r.event_id, r.id]));
    for (const [eventId, copies] of byEvent) {
      expect(new Set(copies.map((c) => c.webhookId)), `the webhook-ids of event ${eventId}`).to.deep.equal(
        new Set([deliveryOf.get(eventId)]),
      );
    }

    const duplicates = receiver.copies.length - byEvent.size;
    const rate = (100 * duplicates) / byEvent.size;
    console.log(
      `      crash test: ${acknowledged.size} events acknowledged (${acknowledgedAtKill} before the kill, at the receiver's request ${receivedAtKill}), ` +
        `${byEvent.size} delivered, ${duplicates} duplicates (${rate.toFixed(1)} %)`,
    );
    // Only what the killed process had claimed and not written back is sent again: one batch, at most
    // 32 deliveries (twice that leaves room for a lease that ran out on a loaded machine).
    expect(duplicates, 'duplicates').to.be.at.most(64);
  });

  it('never leaves an endpoint turned off without its activity entry, whenever the process dies', async () => {
    // The receiver answers 410 a second after each request: long enough to lock the activity log first.
    const receiver = await SlowReceiver.start(1000);
    receiver.status = 410;
    cleanups.push(() => receiver.close());
    const databaseUrl = await freshDatabase('sb_hooks_gone');
    const env = serviceEnv(databaseUrl, { WEBHOOK_TIMEOUT_MS: '1500' });
    const first = await start(env);
    const { token, namespace } = await firstProjectWithEndpoint(first, receiver.url);
    const state = async () => {
      const [row] = await query<{ off: boolean; entries: number }>(
        databaseUrl,
        `select (select not enabled from webhook_endpoints) as off,
           (select count(*)::int from activity where type = 'webhook.disabled') as entries`,
      );
      return row!;
    };

    // The event is published (a publish's statement may write the log too), then the log is locked
    // while the endpoint answers 410, and the process is killed: what it had written is all there is.
    expectData(
      await callAt(first.url, 'POST', projectPath(namespace, '/events'), token, { events: [{ feed: 'general', event: 'gone' }] }),
      201,
    );
    const locker = new pg.Client({ connectionString: databaseUrl });
    await locker.connect();
    cleanups.push(() => locker.end());
    await locker.query('begin');
    await locker.query('lock table activity in exclusive mode');
    await waitUntil('the 410 answered', () => (receiver.copies[0]?.end !== undefined ? true : undefined), 10_000);
    await sleep(500);
    first.child.kill('SIGKILL');
    await first.exited;
    await locker.query('rollback');
    await sleep(300);
    const afterKill = await state();
    expect(afterKill.entries, 'webhook.disabled entries after the kill').to.equal(afterKill.off ? 1 : 0);

    // Started again, the service finishes what the kill cut off (the delivery's lease runs out and the 410 comes again).
    await start(env);
    const settled = await waitUntil('the endpoint turned off', async () => ((await state()).off ? state() : undefined), 20_000);
    expect(settled).to.deep.equal({ off: true, entries: 1 });
  });

  it('delivers through two instances on one database: every event once, both sending, never one webhook-id twice at once', async () => {
    const TOTAL = 400;
    const BATCH = 10;
    const receiver = await SlowReceiver.start(50);
    cleanups.push(() => receiver.close());
    const databaseUrl = await freshDatabase('sb_hooks_two');
    const env = serviceEnv(databaseUrl);
    // Started at once: each logs a first-run invite code of its own (no account exists yet); the first's is used.
    const [one, two] = await Promise.all([start(env), start(env)]);
    receiver.senders = [one.child.pid!, two.child.pid!];
    const { token, namespace, endpoint } = await firstProjectWithEndpoint(one, receiver.url);

    const acknowledged = new Set<string>();
    let n = 0;
    const publisher = async (origin: string) => {
      for (let i = 0; i < TOTAL / BATCH / 4; i++) {
        const events = Array.from({ length: BATCH }, () => ({ feed: 'general', event: `e${++n}` }));
        const answer = expectData(await callAt(origin, 'POST', projectPath(namespace, '/events'), token, { events }), 201);
        for (const event of answer.items as { id: string }[]) acknowledged.add(event.id);
        await sleep(20);
      }
    };
    await Promise.all([publisher(one.url), publisher(one.url), publisher(two.url), publisher(two.url)]);
    expect(acknowledged.size).to.equal(TOTAL);

    await waitUntil('every event received', () => (receiver.copies.length >= TOTAL ? true : undefined), 20_000);
    const rows = await settledDeliveries(databaseUrl, 15_000);
    await sleep(300);
    expect(rows).to.have.length(TOTAL);
    expect(rows.filter((r) => r.state !== 'delivered')).to.deep.equal([]);

    const byEvent = copiesByEvent(receiver.copies, endpoint.secret);
    expect(
      [...acknowledged].filter((id) => !byEvent.has(id)),
      'events never received',
    ).to.deep.equal([]);
    expect(receiver.copies.length, 'copies: each event once').to.equal(TOTAL);

    // No webhook-id was in flight twice at once (which two instances sending it would show).
    const byWebhookId = new Map<string, Copy[]>();
    for (const copy of receiver.copies) byWebhookId.set(copy.webhookId, [...(byWebhookId.get(copy.webhookId) ?? []), copy]);
    for (const [webhookId, copies] of byWebhookId) {
      const spans = copies.map((c) => [c.start, c.end ?? Infinity] as const).sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < spans.length; i++) expect(spans[i]![0], `${webhookId} in flight twice at once`).to.be.at.least(spans[i - 1]![1]);
    }

    const bySender = new Map<number | undefined, number>();
    for (const copy of receiver.copies) bySender.set(copy.sender, (bySender.get(copy.sender) ?? 0) + 1);
    const [byOne, byTwo] = [bySender.get(one.child.pid) ?? 0, bySender.get(two.child.pid) ?? 0];
    console.log(
      `      two instances: ${byOne} delivered by the first, ${byTwo} by the second` +
        (byOne + byTwo < TOTAL ? `, ${TOTAL - byOne - byTwo} not attributed (no /proc?)` : ''),
    );
    if (byOne + byTwo === TOTAL) {
      expect(byOne, 'deliveries by the first instance').to.be.greaterThan(0);
      expect(byTwo, 'deliveries by the second instance').to.be.greaterThan(0);
    }
  });
});
