/**
 * What live streams may cost everyone else, and how soon they end when their access does.
 * Classes guarded: streams one user can open without bound; per-stream work at every heartbeat
 * (a thundering herd of queries); access that outlives the credential that opened the stream;
 * a failed access check that keeps streams open.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { v7 } from 'uuid';
import { LocalBus } from '../../server/src/live/bus.js';
import { LiveStreams } from '../../server/src/live/streams.js';
import type { RunningServer } from '../../server/src/server.js';
import { baseUrl, database, secret, startExtraServer } from '../support/harness.js';
import { apiToken, signUp, signUpOn } from '../support/accounts.js';
import { call, callAt, expectNoContent } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { eventually, percentile, RawStream } from '../support/sse.js';
import { statementsDuring } from '../support/statements.js';

const streamUrl = (base: string, namespace: string) => base + projectPath(namespace, '/events/stream');

/** An account and a project of its own on `server` (an extra server may have a database of its own). */
async function ownerOn(server: RunningServer): Promise<{ token: string; namespace: string }> {
  const { token } = await signUpOn(server);
  const { namespace } = await createProject(token, { name: 'Live limits' }, server.url);
  return { token, namespace };
}

describe('live streams: a cap per user', function () {
  this.timeout(60_000);
  let server: RunningServer;
  before(async () => {
    server = await startExtraServer({ MAX_STREAMS_PER_USER: '3' });
  });
  after(async () => {
    await server.close();
  });

  it(
    'opens MAX_STREAMS_PER_USER streams, refuses the next with 429 too_many_streams and Retry-After, and takes one again once one ' +
      'closes',
    async () => {
      const { token, namespace } = await ownerOn(server);
      // Ten at once: the cap holds under a race too.
      const streams = await Promise.all(Array.from({ length: 10 }, () => RawStream.open(streamUrl(server.url, namespace), { token })));
      try {
        const statuses = streams.map((s) => s.response.status).sort();
        expect(statuses).to.deep.equal([200, 200, 200, 429, 429, 429, 429, 429, 429, 429]);
        const refused = streams.find((s) => s.response.status === 429)!;
        await refused.ended;
        expect(JSON.parse(refused.raw)).to.deep.equal({
          success: false,
          error: { code: 'too_many_streams', message: 'You already have 3 live streams open; close one first.' },
        });
        expect(Number(refused.response.headers.get('retry-after'))).to.be.within(1, 60);

        const open = streams.filter((s) => s.response.status === 200);
        open[0]!.close();
        let again: RawStream | undefined;
        await eventually(
          async () => {
            again?.close();
            again = await RawStream.open(streamUrl(server.url, namespace), { token });
            return again.response.status === 200;
          },
          5_000,
          'a stream once one of the three closed',
        );
        streams.push(again!);
      } finally {
        for (const stream of streams) stream.close();
      }
    },
  );
});

describe('live streams: access ends the stream at once', () => {
  it('a logout ends the streams its session opened within 1 s; other sessions’ streams go on', async () => {
    const owner = await signUp();
    const project = await createProject(owner.token);
    const login = await call('POST', '/v1/auth/login', undefined, { login: owner.username, password: owner.password });
    const second = secret(login.json.data.token as string);
    const mine = await RawStream.open(streamUrl(baseUrl(), project.namespace), { token: owner.token });
    const kept = await RawStream.open(streamUrl(baseUrl(), project.namespace), { token: second });
    try {
      for (const stream of [mine, kept]) await stream.until(() => stream.retry !== undefined, 5_000);
      const started = performance.now();
      expectNoContent(await call('DELETE', '/v1/auth/logout', owner.token));
      const how = await Promise.race([mine.ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 1_000))]);
      expect(how).to.equal('end');
      console.log(`      stream closed ${Math.round(mine.endedAt! - started)} ms after the logout was requested`);
      expect(kept.endedAt).to.equal(undefined);
    } finally {
      mine.close();
      kept.close();
    }
  });

  it('revoking an API token ends the streams it opened within 1 s', async () => {
    const owner = await signUp();
    const project = await createProject(owner.token);
    const key = await apiToken(owner.token);
    const [{ id }] = (await call('GET', '/v1/auth/tokens', owner.token)).json.data.items as [{ id: string }];
    const stream = await RawStream.open(streamUrl(baseUrl(), project.namespace), { token: key });
    try {
      await stream.until(() => stream.retry !== undefined, 5_000);
      expectNoContent(await call('DELETE', `/v1/auth/tokens/${id}`, owner.token));
      const how = await Promise.race([stream.ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 1_000))]);
      expect(how).to.equal('end');
    } finally {
      stream.close();
    }
  });

  it('a failed access check ends the streams (fail closed) instead of keeping them', async () => {
    const logger = pino({ level: 'silent' });
    const live = new LiveStreams(database().orm, new LocalBus(), () => Promise.reject(new Error('database away')), logger, {
      heartbeatMs: 100,
      maxBufferedBytes: 64 * 1024,
      maxStreamsPerUser: 5,
    });
    try {
      const stream = await live.open({ projectId: v7(), userId: v7(), credentialId: v7(), credentialKind: 'session' }, undefined);
      const ended = new Promise((resolve) => stream.once('end', () => resolve('end')));
      stream.resume();
      expect(await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 1_000))])).to.equal('end');
    } finally {
      live.close();
    }
  });
});

describe('live streams: the heartbeat checks access in one statement, whatever the number of streams', function () {
  this.timeout(180_000);
  const streams: RawStream[] = [];
  let server: RunningServer | undefined;
  after(async () => {
    for (const stream of streams) stream.close();
    await server?.close();
  });

  it('1,000 streams cost one statement per heartbeat, and a plain read stays fast meanwhile', async function () {
    if (database().kind !== 'postgresql') {
      console.log('      skipped: statements are counted where the pg driver sends them to a PostgreSQL server');
      this.skip();
    }
    server = await startExtraServer({
      MAX_STREAMS_PER_USER: '1000',
      LIVE_HEARTBEAT_MS: '250',
      HTTP_MAX_CONNECTIONS: '1100',
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: '1100',
    });
    const { token, namespace } = await ownerOn(server);
    for (let i = 0; i < 1000; i += 100) {
      streams.push(...(await Promise.all(Array.from({ length: 100 }, () => RawStream.open(streamUrl(server!.url, namespace), { token })))));
    }
    expect(streams.filter((s) => s.response.status === 200)).to.have.length(1000);

    const latencies: number[] = [];
    const seen = await statementsDuring(async () => {
      const windowStarted = performance.now();
      while (performance.now() - windowStarted < 2_000) {
        const started = performance.now();
        await callAt(server!.url, 'GET', '/v1/users/me', token);
        latencies.push(performance.now() - started);
      }
    });
    const beats = seen.filter((text) => text.includes('with ordinality as v(project_id'));
    const reads = latencies.length;
    console.log(
      `      2 s with 1,000 streams and a 250 ms heartbeat: ${beats.length} access checks; GET /v1/users/me ×${reads}: ` +
        `p50 ${percentile(latencies, 0.5).toFixed(1)} ms, p99 ${percentile(latencies, 0.99).toFixed(1)} ms, max ` +
        `${Math.max(...latencies).toFixed(1)} ms`,
    );
    expect(beats.length).to.be.within(4, 9);
    // Nothing else runs per stream: every other statement in the window is a read's own.
    expect(seen.length - beats.length).to.be.at.most(reads * 3);
  });
});
