/**
 * Resuming the live stream: Last-Event-ID (raw, and the SDK's reconnection after a connection cut
 * mid-message), a backlog larger than a client's buffer, and id order under concurrent publishers,
 * so that resuming from any message loses and doubles nothing.
 */
import { expect } from 'chai';
import { streamEvents, type Event, type StreamDisconnect } from '../../sdk/src/index.js';
import { baseUrl } from '../support/harness.js';
import type { TestUser } from '../support/accounts.js';
import { call, expectError } from '../support/http.js';
import { createProject } from '../support/projects.js';
import { eventually, inParallel, RawStream } from '../support/sse.js';
import { abortedEnd, consume, ids, messageIds, publish, publishMany, streamingOwner, streamPath, streamUrl } from './live-support.js';

describe('live event stream', () => {
  let owner: TestUser, key: string;
  before(async () => ({ owner, key } = await streamingOwner()));

  it('resumes with Last-Event-ID: the events after it first, in order, then live ones, none twice', async () => {
    const project = await createProject(owner.token);
    const [first, ...missed] = await publishMany(baseUrl(), key, project.namespace, 3, 'before');
    const stream = await RawStream.open(streamUrl(project.namespace), { token: owner.token, lastEventId: first!.id });
    try {
      expect(stream.response.status).to.equal(200);
      await stream.waitForEvents(2);
      const live = await publishMany(baseUrl(), key, project.namespace, 2, 'after');
      await stream.waitForEvents(4);
      await new Promise((resolve) => setTimeout(resolve, 300)); // room for a duplicate to show up
      expect(messageIds(stream.events)).to.deep.equal(ids([...missed, ...live]));
      // The latest id: nothing to catch up on; only live events follow.
      const latest = await RawStream.open(streamUrl(project.namespace), { token: owner.token, lastEventId: live[1]!.id });
      await latest.until(() => latest.retry !== undefined, 5_000);
      const more = await publishMany(baseUrl(), key, project.namespace, 1, 'more');
      await latest.waitForEvents(1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(messageIds(latest.events)).to.deep.equal(ids(more));
      latest.close();
    } finally {
      stream.close();
    }
  });

  it('refuses a Last-Event-ID that is not an id (400 invalid_request)', async () => {
    const project = await createProject(owner.token);
    const answer = await call('GET', streamPath(project.namespace), key, undefined, { 'Last-Event-ID': 'not-an-id' });
    expectError(answer, 400, 'invalid_request');
  });

  it(
    'the SDK iterator yields events in order and, when the connection drops mid-message, reconnects after the `retry:` delay with ' +
      'Last-Event-ID: nothing lost or doubled',
    async () => {
      const project = await createProject(owner.token);
      const controller = new AbortController();
      const opens: { at: number; lastEventId: string | undefined }[] = [];
      const drops: number[] = [];
      const reasons: StreamDisconnect[] = [];
      let connections = 0;
      // The first connection breaks in the middle of its 10th event message, as a network failure would.
      const breakingFetch: typeof fetch = async (input, init) => {
        const response = await fetch(input, init);
        connections += 1;
        if (connections > 1 || !response.body) return response;
        const reader = response.body.getReader();
        let seen = 0;
        const body = new ReadableStream<Uint8Array>({
          async pull(out) {
            const { done, value } = await reader.read();
            if (done) return out.close();
            const text = Buffer.from(value).toString('utf8');
            const before = seen;
            seen += text.split('event: event\n').length - 1;
            if (seen >= 10) {
              // Cut inside the 10th message, then fail the connection.
              const cut =
                text
                  .split('event: event\n')
                  .slice(0, 10 - before)
                  .join('event: event\n') + 'event: event\ndata: {"id":';
              out.enqueue(new TextEncoder().encode(cut));
              await reader.cancel();
              out.error(new TypeError('terminated'));
              return;
            }
            out.enqueue(value);
          },
          cancel: () => reader.cancel(),
        });
        return new Response(body, { status: response.status, headers: response.headers });
      };
      const { events, done } = consume(
        streamEvents({
          baseUrl: baseUrl(),
          token: key,
          namespace: project.namespace,
          signal: controller.signal,
          fetch: breakingFetch,
          onOpen: ({ lastEventId }) => opens.push({ at: performance.now(), lastEventId }),
          onDisconnect: (reason) => {
            drops.push(performance.now());
            reasons.push(reason);
          },
        }),
      );
      try {
        await eventually(() => opens.length === 1, 5_000, 'the first connection');
        // The first connection is registered once its answer's head arrived; give the server a beat.
        await new Promise((resolve) => setTimeout(resolve, 100));
        const published = await publishMany(baseUrl(), key, project.namespace, 30, 'sdk');
        await eventually(() => events.length >= 30, 15_000, `30 events (have ${events.length})`);
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(ids(events)).to.deep.equal(ids(published));
        expect(events).to.deep.equal(published);
        expect(opens).to.have.length(2);
        expect(opens[0]!.lastEventId).to.equal(undefined);
        expect(opens[1]!.lastEventId).to.equal(published[8]!.id); // the 9th was the last whole message
        expect(drops).to.have.length(1);
        // The cut connection is a network failure, and the wait is the server's `retry:`.
        expect(reasons).to.have.length(1);
        expect(reasons[0]).to.include({ kind: 'network', retryInMs: 2000 });
        // The server asks for 2000 ms; the SDK waited that long before reconnecting.
        expect(opens[1]!.at - drops[0]!).to.be.at.least(1_900);
      } finally {
        controller.abort();
        await abortedEnd(done);
      }
    },
  );

  it('resumes a backlog far larger than a client’s buffer (~3 MB): paced by the client, all of it, in order', async function () {
    this.timeout(120_000);
    const project = await createProject(owner.token);
    const description = '🎉'.repeat(4_000); // ~16 kB per message
    const published: Event[] = [];
    await inParallel(200, 1, async (i) => {
      published.push(await publish(baseUrl(), key, project.namespace, { event: `big ${i}`, description }));
    });
    const stream = await RawStream.open(streamUrl(project.namespace), { token: key, lastEventId: published[0]!.id });
    try {
      expect(stream.response.status).to.equal(200);
      await stream.waitForEvents(199, 30_000);
      const more = await publishMany(baseUrl(), key, project.namespace, 2, 'live after the backlog');
      await stream.waitForEvents(201, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(messageIds(stream.events)).to.deep.equal(ids([...published.slice(1), ...more]));
      console.log(`      caught up ${(Buffer.byteLength(stream.raw) / 1024 / 1024).toFixed(1)} MB of backlog in one connection`);
    } finally {
      stream.close();
    }
  });

  it('with 20 publishers at once the stream is in id order, so resuming from any message loses and doubles nothing', async function () {
    this.timeout(120_000);
    const project = await createProject(owner.token);
    const first = await RawStream.open(streamUrl(project.namespace), { token: key });
    await first.until(() => first.retry !== undefined, 5_000);
    const published: Event[] = [];
    const publishing = inParallel(400, 20, async (i) => {
      published.push(await publish(baseUrl(), key, project.namespace, { event: `parallel ${i}` }));
    });
    await first.waitForEvents(150, 30_000);
    first.close();
    const resumed = await RawStream.open(streamUrl(project.namespace), { token: key, lastEventId: first.events.at(-1)!.id! });
    await publishing;
    const rest = 400 - first.events.length;
    await resumed.waitForEvents(rest, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    resumed.close();
    const inOrder = (list: (string | undefined)[]) => list.every((id, i) => i === 0 || id! > list[i - 1]!);
    expect(inOrder(messageIds(first.events)), 'the first connection in id order').to.equal(true);
    expect(inOrder(messageIds(resumed.events)), 'the second connection in id order').to.equal(true);
    expect([...messageIds(first.events), ...messageIds(resumed.events)]).to.deep.equal(ids(published).sort());
  });
});
