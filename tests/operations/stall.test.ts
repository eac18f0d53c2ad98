/**
 * Stall: the database hangs instead of refusing. Guards the class "a database that does not answer
 * holds requests as long as it hangs": with the service's default bounds (DB_CONNECT_TIMEOUT_MS,
 * DB_ACQUIRE_TIMEOUT_MS, DB_STATEMENT_TIMEOUT_MS), on a PostgreSQL cluster of the test's own
 * (tests/support/pg-cluster.ts):
 *
 * 1. A statement that runs past `statement_timeout` (it waits on a row lock held elsewhere) answers
 *    503 `unavailable` with Retry-After, not 500.
 * 2. Every process of the cluster is stopped with SIGSTOP. Requests under way (one waiting inside
 *    its transaction) and new ones (reads, writes, login, more at once than the pool has
 *    connections) each answer 503 `unavailable` with Retry-After within 8 s, /readyz within 2.5 s,
 *    while /healthz and GET /v1 answer 200. After SIGCONT the service serves again without a
 *    restart, and every write acknowledged before is there. The slowest answers and the time to
 *    recover are printed.
 * 3. The live events listener (live/bus.ts) loses its connection while the way to the database
 *    accepts connections but answers nothing: its reconnection attempts give up at the connect
 *    bound and it is listening again soon after the database answers.
 *
 * Skipped, with the reason printed, only when the machine has no initdb.
 */
import net from 'node:net';
import { expect } from 'chai';
import pg from 'pg';
import { pino } from 'pino';
import type { BusMessage } from '../../server/src/db/commit-notices.js';
import { PostgresBus } from '../../server/src/live/bus.js';
import type { RunningServer } from '../../server/src/server.js';
import { signUpOn } from '../support/accounts.js';
import {
  callService as call,
  startServiceOnOwnCluster,
  type ClusterAnswer as Answer,
  type ServiceOnCluster,
} from '../support/own-cluster.js';
import type { PgCluster } from '../support/pg-cluster.js';

function expectUnavailable(answer: Answer, when: string): void {
  const what = `${answer.request} ${when}: ${JSON.stringify(answer.json)}`;
  expect(answer.status, what).to.equal(503);
  expect(answer.json, what).to.deep.equal({ success: false, error: { code: 'unavailable', message: answer.json.error.message } });
  expect(answer.json.error.message, what).to.be.a('string').and.not.equal('');
  expect(Number(answer.headers.get('retry-after')), `${what}: Retry-After`).to.be.within(1, 60);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('stall: the database hangs instead of refusing', function () {
  this.timeout(180_000);
  let own: ServiceOnCluster | undefined;
  let cluster: PgCluster;
  let server: RunningServer;
  let base = '';
  let token = '';
  const namespace = 'stall-proof';
  const acknowledged: string[] = [];

  before(async function () {
    // The database bounds are left at their defaults: the bounds asserted below are the defaults'.
    own = await startServiceOnOwnCluster('stall');
    if (!own) this.skip();
    ({ cluster, server } = own);
    base = server.url;

    ({ token } = await signUpOn(server, { username: 'stalled', password: 'stalled-password' }));
    expect((await call(base, 'POST', '/v1/projects', token, { namespace, name: 'Stall proof' })).status).to.equal(201);
    for (let i = 0; i < 10; i++) {
      const insight = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: `before ${i}`, value: i });
      expect(insight.status).to.equal(201);
      acknowledged.push(insight.json.data.id);
    }
  });

  after(async () => {
    await own?.close();
  });

  /** A transaction of the test's own holding the project's row, so that a write of the service waits inside its transaction. */
  async function holdProjectRow(): Promise<pg.Client> {
    const holder = new pg.Client({ connectionString: cluster.url('signalboard') });
    await holder.connect();
    await holder.query('begin');
    await holder.query('select 1 from projects where namespace = $1 for update', [namespace]);
    return holder;
  }

  async function waitForLockWaiter(): Promise<void> {
    const started = performance.now();
    while (performance.now() - started < 5_000) {
      const waiting = await cluster.psql(
        `select count(*) from pg_stat_activity where datname = 'signalboard' and wait_event_type = 'Lock'`,
      );
      if (Number(waiting.trim()) > 0) return;
      await sleep(20);
    }
    throw new Error('the write never waited on the held row');
  }

  it('answers 503 unavailable with Retry-After when a statement runs past statement_timeout', async () => {
    const holder = await holdProjectRow();
    try {
      const answer = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: 'past the timeout', value: 1 });
      console.log(`      a write waiting on a held row: ${answer.status} after ${Math.round(answer.ms)} ms`);
      expectUnavailable(answer, 'past statement_timeout');
      expect(answer.ms).to.be.within(4_500, 8_000);
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
  });

  it('answers 503 within the bounds while every process of the cluster is stopped, and serves again after SIGCONT', async () => {
    const needsDatabase: [string, string, unknown?][] = [
      ['GET', '/v1/users/me'],
      ['GET', `/v1/projects/${namespace}`],
      ['GET', `/v1/projects/${namespace}/insights`],
      ['GET', `/v1/projects/${namespace}/events`],
      ['POST', `/v1/projects/${namespace}/insights`, { title: 'during the stall', value: 1 }],
      ['POST', `/v1/projects/${namespace}/feeds/general/events`, { event: 'during the stall' }],
      ['POST', '/v1/auth/login', { login: 'stalled', password: 'stalled-password' }],
    ];
    const send = ([method, p, body]: [string, string, unknown?]) => call(base, method, p, p === '/v1/auth/login' ? undefined : token, body);

    // Under way when the database stops: a write inside its transaction, waiting on a row the test holds.
    const holder = await holdProjectRow();
    holder.on('error', () => {});
    const waitingWrite = send(['POST', `/v1/projects/${namespace}/insights`, { title: 'waiting at the stall', value: 2 }]);
    await waitForLockWaiter();
    // And a burst just sent.
    const burst = needsDatabase.map(send);

    await cluster.freeze();
    const frozenAt = performance.now();
    const answers: Answer[] = [];
    /** New requests, more at once than the pool has connections (10), /readyz among them; GET /healthz and GET /v1 alongside. */
    const round = async (label: string): Promise<number> => {
      const requests: [string, string, unknown?][] = [
        ...needsDatabase,
        ...needsDatabase,
        ...needsDatabase,
        ['GET', '/readyz'],
        ['GET', '/readyz'],
      ];
      const [roundAnswers, healthz, root] = await Promise.all([
        Promise.all(requests.map(send)),
        call(base, 'GET', '/healthz'),
        call(base, 'GET', '/v1'),
      ]);
      answers.push(...roundAnswers);
      const slowest = Math.max(...roundAnswers.map((a) => a.ms));
      console.log(`      ${roundAnswers.length} requests at once ${label}: slowest ${Math.round(slowest)} ms`);
      expect([healthz.status, root.status], 'GET /healthz and GET /v1 while the database hangs').to.deep.equal([200, 200]);
      return slowest;
    };
    try {
      await round('while requests under way wait');
      await round('again');
      const underWay = await waitingWrite;
      expectUnavailable(underWay, 'waiting in its transaction when the database stopped');
      answers.push(underWay);
      for (const answer of await Promise.all(burst)) {
        // Sent just before the stop: some may have been answered before it.
        if (answer.status === 503) answers.push(answer);
        else expect(answer.status, `${answer.request} sent just before the stop`).to.be.oneOf([200, 201]);
        if (answer.status === 201 && answer.request.endsWith('/insights')) acknowledged.push(answer.json.data.id);
      }
      // Every connection under way has given up on the server by now. One handed out again would make its request wait
      // behind the unanswered query until the query bound (6 s); fresh ones fail to connect within the connect bound (3 s).
      const slowest = await round('once every request under way has been answered');
      expect(slowest, 'the slowest answer once every connection under way has given up').to.be.below(5_000);
    } finally {
      await cluster.thaw();
    }
    const thawedAt = performance.now();
    await holder.query('rollback').catch(() => {});
    await holder.end().catch(() => {});

    for (const answer of answers) expectUnavailable(answer, 'while the database hangs');
    const readyz = answers.filter((a) => a.request === 'GET /readyz');
    const others = answers.filter((a) => a.request !== 'GET /readyz');
    const slowest = others.reduce((a, b) => (b.ms > a.ms ? b : a));
    const slowestReady = readyz.reduce((a, b) => (b.ms > a.ms ? b : a));
    console.log(
      `      stall of ${Math.round(thawedAt - frozenAt)} ms: ${answers.length} answers, all 503 unavailable with Retry-After; ` +
        `slowest ${Math.round(slowest.ms)} ms (${slowest.request}), /readyz slowest ${Math.round(slowestReady.ms)} ms of ${readyz.length}`,
    );
    expect(slowest.ms, `the slowest answer while the database hangs (${slowest.request})`).to.be.below(8_000);
    expect(slowestReady.ms, 'the slowest /readyz while the database hangs').to.be.below(2_500);

    // The database answers again; the service recovers by itself.
    let recovered: number | undefined;
    while (performance.now() - thawedAt < 60_000) {
      const [ready, me] = await Promise.all([call(base, 'GET', '/readyz'), call(base, 'GET', '/v1/users/me', token)]);
      if (ready.status === 200 && me.status === 200) {
        recovered = performance.now() - thawedAt;
        break;
      }
      await sleep(100);
    }
    expect(recovered, 'the service serves again within 60 s of SIGCONT').to.not.equal(undefined);
    console.log(`      recovery: serving again ${Math.round(recovered!)} ms after SIGCONT, no restart`);

    const insights = await call(base, 'GET', `/v1/projects/${namespace}/insights?limit=100`, token);
    expect(insights.status).to.equal(200);
    expect((insights.json.data.items as { id: string }[]).map((i) => i.id)).to.include.members(acknowledged);
    const after = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: 'after the stall', value: 3 });
    expect(after.status, JSON.stringify(after.json)).to.equal(201);
  });

  it('reconnects the live listener, each attempt bounded, when the way to the database stops answering and comes back', async () => {
    // Between the listener and the cluster: either a pipe to it, or a hole that accepts connections and never answers.
    let answering = true;
    let intoTheHole = 0;
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
      if (!answering) {
        intoTheHole++;
        return;
      }
      const upstream = net.connect(cluster.port, '127.0.0.1');
      upstream.on('error', () => socket.destroy());
      socket.pipe(upstream).pipe(socket);
      socket.on('close', () => upstream.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxyUrl = `postgres://postgres@127.0.0.1:${(proxy.address() as net.AddressInfo).port}/signalboard`;
    const direct = new pg.Client({ connectionString: cluster.url('signalboard') });
    await direct.connect();
    const notify = (channel: string, payload: string) => direct.query('select pg_notify($1, $2)', [channel, payload]);
    const bounds = { connectTimeoutMs: 500, acquireTimeoutMs: 500, statementTimeoutMs: 1_000 };
    const logger = pino({ level: 'silent' });
    let bus: PostgresBus | undefined;
    try {
      answering = false;
      const refused = await Promise.race([
        PostgresBus.start(proxyUrl, notify, logger, bounds).then(
          () => 'started',
          (error: Error) => error.message,
        ),
        sleep(5_000).then(() => 'no outcome within 5 s'),
      ]);
      expect(refused, 'starting against a server that never answers').to.equal('timeout expired');

      answering = true;
      bus = await PostgresBus.start(proxyUrl, notify, logger, bounds);
      const received: BusMessage[] = [];
      let resets = 0;
      bus.subscribe(
        (message) => received.push(message),
        () => resets++,
      );
      // The connection is lost, and for 2 s every attempt to connect again goes into the hole.
      answering = false;
      intoTheHole = 0;
      for (const socket of sockets) socket.destroy();
      await sleep(2_000);
      const attempts = intoTheHole;
      answering = true;
      const back = performance.now();
      while (resets === 0 && performance.now() - back < 10_000) await sleep(20);
      console.log(
        `      live listener: ${attempts} attempt(s) to connect in 2 s of no answer; ` +
          `listening again ${Math.round(performance.now() - back)} ms after the database answered`,
      );
      expect(resets, 'the listener reconnected (and told its subscribers to catch up)').to.equal(1);
      const message: BusMessage = { kind: 'project-deleted', projectId: '00000000-0000-4000-8000-000000000001' };
      await bus.announce(message);
      while (received.length === 0 && performance.now() - back < 15_000) await sleep(20);
      expect(received).to.deep.equal([message]);
    } finally {
      await bus?.close();
      await direct.end();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
