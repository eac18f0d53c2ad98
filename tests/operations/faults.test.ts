/**
 * Faults: the database goes away under a running service (the service's own stop is tests/http/shutdown.test.ts).
 *
 * Outage: a PostgreSQL cluster of our own (tests/support/pg-cluster.ts) is stopped (`pg_ctl stop
 *    -m fast`) while the service runs on it. Meanwhile every request that needs the database must
 *    answer 503 `unavailable` within 5 s (the longest is printed), /readyz 503, /healthz and GET /v1
 *    200; when the cluster is back the service serves again without a restart (the time to recover
 *    is printed), and everything committed before the stop is still there.
 *    On the same cluster, guarding the class "a database lost mid-transaction answers 500": the
 *    backend of a request's open transaction is killed (`pg_terminate_backend`), and the cluster
 *    is stopped at once (`-m immediate`) under a stream of writes. Each such request answers 503
 *    `unavailable` with Retry-After (or 201 when it committed first), never 500; the service then
 *    serves again, with every acknowledged write there.
 * Skipped, with the reason printed, only when the machine has no initdb.
 */
import { expect } from 'chai';
import pg from 'pg';
import type { RunningServer } from '../../server/src/server.js';
import { signUpOn } from '../support/accounts.js';
import {
  callService as call,
  startServiceOnOwnCluster,
  type ClusterAnswer as Answer,
  type ServiceOnCluster,
} from '../support/own-cluster.js';
import type { PgCluster } from '../support/pg-cluster.js';

describe('faults: the database goes down and comes back', function () {
  this.timeout(300_000);
  let own: ServiceOnCluster | undefined;
  let cluster: PgCluster;
  let server: RunningServer;
  let base = '';
  let token = '';
  let namespace = '';
  const insightIds: string[] = [];
  const eventIds: string[] = [];

  before(async function () {
    own = await startServiceOnOwnCluster('faults');
    if (!own) this.skip();
    ({ cluster, server } = own);
    base = server.url;
  });

  after(async () => {
    await own?.close();
  });

  it('commits data, answers 503 unavailable within 5 s while the database is down, and serves again when it is back', async () => {
    // Data committed before the outage.
    ({ token } = await signUpOn(server, { username: 'faulty', password: 'faulty-password' }));
    namespace = 'outage-proof';
    expect((await call(base, 'POST', '/v1/projects', token, { namespace, name: 'Outage proof' })).status).to.equal(201);
    for (let i = 0; i < 20; i++) {
      const insight = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: `figure ${i}`, value: i });
      expect(insight.status).to.equal(201);
      insightIds.push(insight.json.data.id);
      const event = await call(base, 'POST', `/v1/projects/${namespace}/feeds/general/events`, token, { event: `event ${i}`, tags: { i } });
      expect(event.status).to.equal(201);
      eventIds.push(event.json.data.id);
    }

    // The outage.
    const stopStarted = performance.now();
    await cluster.stop('fast');
    console.log(`      pg_ctl stop -m fast: ${Math.round(performance.now() - stopStarted)} ms`);

    const needsDatabase: [string, string, unknown?][] = [
      ['GET', '/v1/users/me'],
      ['GET', `/v1/projects/${namespace}`],
      ['GET', `/v1/projects/${namespace}/insights`],
      ['GET', `/v1/projects/${namespace}/events`],
      ['POST', `/v1/projects/${namespace}/insights`, { title: 'during the outage', value: 1 }],
      ['POST', '/v1/auth/login', { login: 'faulty', password: 'faulty-password' }],
      ['GET', '/readyz'],
    ];
    let longest = 0;
    let longestRequest = '';
    const seen: string[] = [];
    const outageStarted = performance.now();
    // Three rounds, one after another and then all at once, over a few seconds of outage.
    for (let round = 0; round < 3; round++) {
      const send = ([method, p, body]: [string, string, unknown?]) =>
        call(base, method, p, p.startsWith('/v1/auth/login') ? undefined : token, body).then((a) => ({ method, p, a }));
      const answers =
        round === 2
          ? await Promise.all(needsDatabase.flatMap((r) => [r, r]).map(send))
          : await (async () => {
              const out = [];
              for (const request of needsDatabase) out.push(await send(request));
              return out;
            })();
      for (const { method, p, a } of answers) {
        seen.push(`${method} ${p} ${a.status}`);
        if (a.ms > longest) [longest, longestRequest] = [a.ms, `${method} ${p}`];
        expect(a.status, `${method} ${p} while the database is down: ${JSON.stringify(a.json)}`).to.equal(503);
        expect(a.json, `${method} ${p}`).to.deep.include({ success: false });
        expect(a.json.error.code, `${method} ${p}`).to.equal('unavailable');
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    // What needs no database still answers.
    expect((await call(base, 'GET', '/healthz')).status).to.equal(200);
    expect((await call(base, 'GET', '/v1')).status).to.equal(200);
    console.log(
      `      outage: ${seen.length} requests over ${Math.round(performance.now() - outageStarted)} ms, all 503 unavailable; ` +
        `longest ${Math.round(longest)} ms (${longestRequest})`,
    );
    expect(longest, `the longest answer while the database was down (${longestRequest})`).to.be.below(5_000);

    // The database comes back; the service recovers by itself.
    const startStarted = performance.now();
    await cluster.start();
    const backAt = performance.now();
    console.log(`      pg_ctl start: ${Math.round(backAt - startStarted)} ms`);
    let recovered: number | undefined;
    let attempts = 0;
    while (performance.now() - backAt < 60_000) {
      attempts += 1;
      const [ready, me] = await Promise.all([call(base, 'GET', '/readyz'), call(base, 'GET', '/v1/users/me', token)]);
      if (ready.status === 200 && me.status === 200) {
        recovered = performance.now() - backAt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(recovered, 'the service serves again within 60 s of the database being back').to.not.equal(undefined);
    console.log(`      recovery: serving again ${Math.round(recovered!)} ms after the database was back (${attempts} polls), no restart`);

    // Nothing committed before the stop is lost, and writes work again.
    const insights = await call(base, 'GET', `/v1/projects/${namespace}/insights?limit=100`, token);
    expect(insights.status).to.equal(200);
    expect((insights.json.data.items as { id: string }[]).map((i) => i.id)).to.include.members(insightIds);
    const events = await call(base, 'GET', `/v1/projects/${namespace}/events?limit=100`, token);
    expect(events.status).to.equal(200);
    expect((events.json.data.items as { id: string }[]).map((e) => e.id)).to.include.members(eventIds);
    const direct = new pg.Client({ connectionString: cluster.url('signalboard') });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ n: number }>('select count(*)::int as n from insights where id = any($1::uuid[])', [
        insightIds,
      ]);
      expect(rows[0]!.n).to.equal(insightIds.length);
      // The write refused during the outage did not half-happen.
      const during = await direct.query<{ n: number }>(`select count(*)::int as n from insights where title = 'during the outage'`);
      expect(during.rows[0]!.n).to.equal(0);
    } finally {
      await direct.end();
    }
    const after = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: 'after the outage', value: 2 });
    expect(after.status).to.equal(201);
  });

  it('answers 503, never 500, when the backend of an open transaction is killed, and serves again', async () => {
    // The request's transaction waits on the project's row, which a transaction of the test's own holds.
    const holder = new pg.Client({ connectionString: cluster.url('signalboard') });
    await holder.connect();
    await holder.query('begin');
    await holder.query('select 1 from projects where namespace = $1 for update', [namespace]);
    try {
      const write = call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: 'killed mid-transaction', value: 3 });
      let waiting: number[] = [];
      for (let i = 0; i < 250 && waiting.length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        const { rows } = await holder.query<{ pid: number }>(
          `select pid from pg_stat_activity where datname = 'signalboard' and wait_event_type = 'Lock'`,
        );
        waiting = rows.map((row) => row.pid);
      }
      expect(waiting, 'the write waits inside its transaction').to.have.length(1);
      await cluster.psql(`select pg_terminate_backend(${waiting[0]})`);
      const answer = await write;
      console.log(
        `      backend of an open transaction killed: ${answer.status} ${answer.json?.error?.code}, ` +
          `Retry-After ${answer.headers.get('retry-after')}`,
      );
      expect(answer.status, JSON.stringify(answer.json)).to.equal(503);
      expect(answer.json.error.code).to.equal('unavailable');
      expect(Number(answer.headers.get('retry-after'))).to.be.within(1, 60);
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
    const after = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: 'after the kill', value: 4 });
    expect(after.status, JSON.stringify(after.json)).to.equal(201);
  });

  it('answers 201 or 503, never 500, to writes under way when the cluster stops at once, and serves again', async () => {
    // Eight writers, each writing one event after another until one of its writes fails after the stop.
    let stopped = false;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      const answers: Answer[] = [];
      for (let i = 0; !stopped || answers.at(-1)?.status === 201; i++) {
        const event = { event: `writer ${w} #${i}`, tags: { w, i } };
        answers.push(await call(base, 'POST', `/v1/projects/${namespace}/feeds/general/events`, token, event));
      }
      return answers;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await cluster.stop('immediate');
    stopped = true;
    const answers = (await Promise.all(writers)).flat();
    const statuses = answers.map((a) => a.status);
    const count = (status: number) => statuses.filter((s) => s === status).length;
    console.log(`      pg_ctl stop -m immediate during writes: ${count(201)} × 201, ${count(503)} × 503`);
    for (const answer of answers) {
      expect(answer.status, JSON.stringify(answer.json)).to.be.oneOf([201, 503]);
      if (answer.status === 503) expect(answer.json.error.code).to.equal('unavailable');
    }
    await cluster.start();
    let back = false;
    for (let i = 0; i < 300 && !back; i++) {
      back = (await call(base, 'GET', '/readyz')).status === 200;
      if (!back) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(back, 'ready again within 30 s of the restart').to.equal(true);
    // Every write acknowledged before the stop survived it (a crash stop replays the WAL).
    // Every page of them: the writers may have stored more than a page holds.
    const stored: string[] = [];
    for (let cursor: string | null = ''; cursor !== null;) {
      const events = await call(base, 'GET', `/v1/projects/${namespace}/events?limit=100${cursor ? `&cursor=${cursor}` : ''}`, token);
      expect(events.status).to.equal(200);
      stored.push(...(events.json.data.items as { id: string }[]).map((e) => e.id));
      cursor = events.json.data.next_cursor as string | null;
    }
    expect(stored).to.include.members(answers.filter((a) => a.status === 201).map((a) => a.json.data.id));
  });
});
