/**
 * The live stream of a project's events (Server-Sent Events): the messages on the wire, the SDK's
 * iterator and its abort, access (removed members, deleted projects, non-members), and a client that
 * never reads. Resuming is in live-resume.test.ts, a stream narrowed to one feed in
 * live-feed.test.ts, two service instances in live-instances.test.ts.
 */
import { expect } from 'chai';
import { Signalboard, SignalboardError, streamEvents, type ResponseInfo, type StreamDisconnect } from '../../sdk/src/index.js';
import { baseUrl, database } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectError, expectNoContent } from '../support/http.js';
import { addMember, createProject, projectPath } from '../support/projects.js';
import { eventually, inParallel, RawStream, StalledClient } from '../support/sse.js';
import {
  abortedEnd,
  collector,
  consume,
  ids,
  messageIds,
  publish,
  publishMany,
  STALL_MS,
  streamingOwner,
  streamPath,
  streamUrl,
  wire,
} from './live-support.js';

describe('live event stream', () => {
  let owner: TestUser, key: string;
  before(async () => ({ owner, key } = await streamingOwner()));

  it('sends each published event in order as `id: <event id>`, `event: event`, `data: <Event JSON>`, after a `retry:` line', async () => {
    const project = await createProject(owner.token);
    const stream = await RawStream.open(streamUrl(project.namespace), { token: key });
    try {
      expect(stream.response.status).to.equal(200);
      expect(stream.response.headers.get('content-type')).to.match(/^text\/event-stream/);
      expect(stream.response.headers.get('cache-control')).to.equal('no-cache');
      await stream.until(
        () => stream.retry !== undefined,
        5_000,
        () => 'the retry line',
      );
      expect(stream.raw).to.match(/^retry: \d+\n\n/);

      const published = await publishMany(baseUrl(), key, project.namespace, 3, 'live');
      const received = await stream.waitForEvents(3);
      expect(messageIds(received)).to.deep.equal(ids(published));
      expect(received.map((m) => JSON.parse(m.data))).to.deep.equal(published);
      // A heartbeat comment may fall between any two messages (the server's beat runs on its own clock).
      const withoutHeartbeats = stream.raw.replaceAll(': heartbeat\n\n', '');
      expect(withoutHeartbeats).to.equal(`retry: ${stream.retry}\n\n${published.map(wire).join('')}`);
    } finally {
      stream.close();
    }
  });

  it('the SDK iterator ends with a SignalboardAbortError when its signal aborts, as every call does; leaving the loop ends it quietly', async () => {
    const project = await createProject(owner.token);
    const controller = new AbortController();
    let opened = false;
    const { events, done } = consume(
      streamEvents({
        baseUrl: baseUrl(),
        token: key,
        namespace: project.namespace,
        signal: controller.signal,
        onOpen: () => (opened = true),
      }),
    );
    await eventually(() => opened, 5_000, 'the connection');
    await new Promise((resolve) => setTimeout(resolve, 100));
    await publishMany(baseUrl(), key, project.namespace, 1, 'one');
    await eventually(() => events.length === 1, 5_000, 'one event');
    controller.abort(new Error('enough'));
    const error = await abortedEnd(done);
    expect(error).to.include({ status: 0, code: 'aborted' });
    expect((error.cause as Error).message).to.equal('enough');
    // Leaving a loop early (break) also ends it.
    const iterator = streamEvents({ baseUrl: baseUrl(), token: key, namespace: project.namespace, lastEventId: events[0]!.id });
    const pending = iterator.next();
    await publishMany(baseUrl(), key, project.namespace, 1, 'two');
    const next = await pending;
    expect(next.done).to.equal(false);
    expect(await iterator.return(undefined)).to.deep.equal({ done: true, value: undefined });
  });

  it('a client publishes and streams one project: events.publish and events.stream', async () => {
    const project = await createProject(owner.token);
    const sb = new Signalboard({ baseUrl: baseUrl(), token: key });
    const first = await sb.events.publish(project.namespace, 'general', { event: 'bundled', tags: { n: 1 } });
    expect(first).to.deep.include({ feed: 'general', event: 'bundled', tags: { n: 1 } });
    const controller = new AbortController();
    const heads: ResponseInfo[] = [];
    const { events: received, done } = consume(
      sb.events.stream(project.namespace, {
        lastEventId: first.id,
        signal: controller.signal,
        onOpen: ({ response }) => heads.push(response),
      }),
    );
    const second = await sb.events.publish(project.namespace, 'general', { event: 'bundled again' });
    await eventually(() => received.length === 1, 5_000, 'the second event');
    controller.abort();
    await abortedEnd(done);
    expect(received).to.deep.equal([second]);
    // onOpen gives each connection's head, as .withResponse() does a call's.
    expect(heads).to.have.length(1);
    expect(heads[0]!.status).to.equal(200);
    expect(heads[0]!.requestId).to.be.a('string');
    expect(heads[0]!.headers.get('Content-Type')).to.match(/^text\/event-stream/);
    const refusal = (await sb.events.publish(project.namespace, 'nope', { event: 'x' }).catch((e: unknown) => e)) as SignalboardError;
    expect([refusal.status, refusal.code]).to.deep.equal([404, 'not_found']);
  });

  it('a member removed by the owner loses its open stream within 2 s, and cannot reopen it (404)', async () => {
    const project = await createProject(owner.token);
    const mate = await signUp();
    await addMember(owner.token, project.namespace, mate);
    const mateKey = await apiToken(mate.token);
    const session = await RawStream.open(streamUrl(project.namespace), { token: mate.token });
    const viaKey = await RawStream.open(streamUrl(project.namespace), { token: mateKey });
    const owners = await RawStream.open(streamUrl(project.namespace), { token: owner.token });
    try {
      for (const stream of [session, viaKey, owners]) {
        expect(stream.response.status).to.equal(200);
        await stream.until(() => stream.retry !== undefined, 5_000);
      }
      const started = performance.now();
      expectNoContent(await call('DELETE', projectPath(project.namespace, `/members/${mate.username}`), owner.token));
      const how = await Promise.race([
        Promise.all([session.ended, viaKey.ended]),
        new Promise((resolve) => setTimeout(() => resolve('still open'), 2_000)),
      ]);
      expect(how, 'the removed member’s streams').to.deep.equal(['end', 'end']);
      const elapsed = Math.max(session.endedAt!, viaKey.endedAt!) - started;
      expect(elapsed).to.be.below(2_000);
      console.log(`      removed member's streams closed ${elapsed.toFixed(0)} ms after the removal was requested`);
      // The owner's stream is untouched and still delivers.
      const [event] = await publishMany(baseUrl(), key, project.namespace, 1, 'after removal');
      await owners.waitForEvents(1);
      expect(messageIds(owners.events)).to.deep.equal([event!.id]);
      expect(session.events).to.deep.equal([]);
      expectError(await call('GET', streamPath(project.namespace), mate.token), 404, 'not_found');
      // The SDK gives up at once on a 404 and says why.
      const refusal = await consume(streamEvents({ baseUrl: baseUrl(), token: mateKey, namespace: project.namespace })).done.catch(
        (e: unknown) => e,
      );
      expect(refusal).to.be.instanceOf(SignalboardError);
      expect([(refusal as SignalboardError).status, (refusal as SignalboardError).code]).to.deep.equal([404, 'not_found']);
    } finally {
      for (const stream of [session, viaKey, owners]) stream.close();
    }
  });

  it('a deleted project ends its streams within 2 s; the SDK sees the service close it (onDisconnect closed), then throws the 404', async () => {
    const project = await createProject(owner.token);
    const stream = await RawStream.open(streamUrl(project.namespace), { token: key });
    const reasons: StreamDisconnect[] = [];
    let opened = false;
    const sdk = consume(
      streamEvents({
        baseUrl: baseUrl(),
        token: key,
        namespace: project.namespace,
        onOpen: () => (opened = true),
        onDisconnect: (reason) => reasons.push(reason),
      }),
    );
    try {
      await stream.until(() => stream.retry !== undefined, 5_000);
      await eventually(() => opened, 5_000, 'the SDK stream');
      const started = performance.now();
      expectNoContent(await call('DELETE', projectPath(project.namespace), owner.token));
      const how = await Promise.race([stream.ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 2_000))]);
      expect(how).to.equal('end');
      expect(stream.endedAt! - started).to.be.below(2_000);
      const refusal = (await sdk.done.catch((error: unknown) => error)) as SignalboardError;
      expect(refusal).to.be.instanceOf(SignalboardError);
      expect([refusal.status, refusal.code]).to.deep.equal([404, 'not_found']);
      expect(reasons).to.deep.equal([{ kind: 'closed', retryInMs: 2000 }]);
    } finally {
      stream.close();
    }
  });

  it('answers 404 to a non-member and 401 without a credential (with WWW-Authenticate); the SDK throws them', async () => {
    const project = await createProject(owner.token);
    const stranger = await signUp();
    expectError(await call('GET', streamPath(project.namespace), stranger.token), 404, 'not_found');
    expectError(await call('GET', streamPath(project.namespace), await apiToken(stranger.token)), 404, 'not_found');
    expectError(await call('GET', streamPath('no-such-namespace')), 401, 'unauthenticated');
    expectError(await call('GET', streamPath(project.namespace)), 401, 'unauthenticated');
    expectError(await call('GET', streamPath(project.namespace), 'ses_not-a-real-token'), 401, 'unauthenticated');
    for (const [token, status, code] of [
      [stranger.token, 404, 'not_found'],
      [undefined, 401, 'unauthenticated'],
    ] as const) {
      const error = (await consume(streamEvents({ baseUrl: baseUrl(), token, namespace: project.namespace })).done.catch(
        (e: unknown) => e,
      )) as SignalboardError;
      expect(error).to.be.instanceOf(SignalboardError);
      expect([error.status, error.code]).to.deep.equal([status, code]);
    }
  });

  const slowCount = process.env.DATABASE_URL ? 10_000 : 2_000;
  it(
    `a client that never reads is disconnected and the server's memory stays bounded while ${slowCount.toLocaleString('en')} events are ` +
      `published (10,000 on PostgreSQL, 2,000 embedded)`,
    async function () {
      this.timeout(900_000);
      const project = await createProject(owner.token);
      const stalled = await StalledClient.open(baseUrl(), streamPath(project.namespace), key);
      expect(stalled.head).to.match(/^HTTP\/1\.1 200 /);
      // ~16 kB per event on the wire (4,000 four-byte characters): 10,000 events are ~160 MB, more than
      // the bound, which an unbounded buffer for this one client would therefore break.
      const description = '🎉'.repeat(4_000);
      const bound = 150 * 1024 * 1024;
      const heldBound = 64 * 1024 * 1024;
      // The garbage of 20 requests in flight (client and server share this process) would otherwise
      // swing RSS by V8's whim: collected every 250 events, what remains is what is actually held.
      const gc = collector();
      gc();
      const baseline = process.memoryUsage();
      let peak = baseline.rss;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 25);
      const started = performance.now();
      let wireBytes = 0;
      let published = 0;
      // By 16 MB of stream the kernel's buffers and the server's are full (they hold ~4 MB here): the
      // server waits STALL_MS for the client to read before it disconnects it.
      let fullAt: number | undefined;
      try {
        await inParallel(slowCount, 20, async (i) => {
          const event = await publish(baseUrl(), key, project.namespace, { event: `slow ${i}`, description });
          wireBytes += Buffer.byteLength(wire(event));
          if (fullAt === undefined && wireBytes > 16 * 1024 * 1024) fullAt = performance.now();
          if (++published % 250 === 0) gc();
        });
      } finally {
        clearInterval(sampler);
      }
      const seconds = (performance.now() - started) / 1000;
      peak = Math.max(peak, process.memoryUsage().rss);
      // What the process still holds, the stalled connection still open on the client's side.
      gc();
      const settled = process.memoryUsage();
      const held = settled.heapUsed + settled.external - (baseline.heapUsed + baseline.external);
      const growth = peak - baseline.rss;

      // The server cut the client off: once the client reads what the kernel kept, the connection is
      // closed. (Reading any earlier would count as progress and spare it.)
      expect(fullAt, 'enough was published to fill the buffers').to.not.equal(undefined);
      const wait = fullAt! + STALL_MS + 3_000 - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const closed = await stalled.drain(10_000);
      stalled.destroy();
      const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
      console.log(
        `      ${slowCount} events (${mb(wireBytes)} of stream) published in ${seconds.toFixed(1)} s ` +
          `(${(slowCount / seconds).toFixed(0)}/s); ` +
          `test-process RSS ${mb(baseline.rss)} → peak ${mb(peak)}: growth ${mb(growth)} (bound ${mb(bound)}); ` +
          `heap+external held after GC ${mb(held)} (bound ` +
          `${mb(heldBound)}${database().kind === 'postgresql' ? '' : ', not checked embedded'}); the stalled client got ` +
          `${mb(stalled.bytes)} before being cut off`,
      );
      expect(closed, 'the server closed the stalled connection').to.equal(true);
      // …having stopped sending long before the end: what it sent is bounded by its 1 MiB plus the kernel's buffers.
      expect(stalled.bytes).to.be.below(wireBytes / 4);
      expect(growth).to.be.below(bound);
      // Embedded, PGlite's WebAssembly memory is counted as external and swamps this figure.
      if (database().kind === 'postgresql') expect(held).to.be.below(heldBound);
    },
  );
});
