/**
 * The live stream of a project's events (Server-Sent Events): order and ids, resuming
 * with Last-Event-ID, the SDK's reconnecting iterator, access (removed members, deleted projects,
 * non-members), two service instances on one PostgreSQL database, and a client that never reads.
 */
import { expect } from 'chai';
import v8 from 'node:v8';
import vm from 'node:vm';
import {
  Signalboard,
  SignalboardAbortError,
  SignalboardError,
  streamEvents,
  type Event,
  type ResponseInfo,
  type Schemas,
  type StreamDisconnect,
} from '../../sdk/src/index.js';
import { baseUrl, count, database, startExtraServer } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError, expectNoContent } from '../support/http.js';
import { addMember, createProject, projectPath } from '../support/projects.js';
import { eventually, inParallel, percentile, RawStream, StalledClient } from '../support/sse.js';

const streamPath = (namespace: string) => projectPath(namespace, '/events/stream');
const streamUrl = (namespace: string, base = baseUrl()) => base + streamPath(namespace);
const wire = (event: Event) => `id: ${event.id}\nevent: event\ndata: ${JSON.stringify(event)}\n\n`;

/** Publishes an event to the project's `general` feed with the SDK. */
function publish(base: string, token: string, namespace: string, event: Schemas['PublishEventRequest']): Promise<Event> {
  return new Signalboard({ baseUrl: base, token }).events.publish(namespace, 'general', event);
}

async function publishMany(base: string, token: string, namespace: string, count: number, label: string): Promise<Event[]> {
  const events: Event[] = [];
  for (let i = 0; i < count; i++) events.push(await publish(base, token, namespace, { event: `${label} ${i}` }));
  return events;
}

/** Consumes an SDK iterator in the background, into `events`, until it throws (its signal's abort included). */
function consume(iterator: AsyncGenerator<Event, void, undefined>) {
  const events: Event[] = [];
  const done = (async () => {
    for await (const event of iterator) events.push(event);
  })();
  return { events, done };
}

/** Waits for a consumed stream that a test aborted: it ends, as every SDK call does on an abort, with a SignalboardAbortError. */
async function abortedEnd(done: Promise<void>): Promise<SignalboardAbortError> {
  const error = await done.then(
    () => new Error('the stream ended without an error'),
    (caught: unknown) => caught,
  );
  expect(error).to.be.instanceOf(SignalboardAbortError);
  return error as SignalboardAbortError;
}

/** The garbage collector, exposed at run time (the test process is not started with --expose-gc). */
function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** How long the server lets a client leave its buffer full before disconnecting it (live/streams.ts). */
const STALL_MS = 15_000;

const ids = (events: { id: string }[]) => events.map((e) => e.id);
const messageIds = (messages: { id: string | undefined }[]) => messages.map((m) => m.id);

describe('live event stream', () => {
  let owner: TestUser;
  let key: string;
  before(async () => {
    owner = await signUp();
    key = await apiToken(owner.token);
  });

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

  describe('narrowed to one feed (`feed`)', () => {
    /** A project with the feeds `general` and `orders`. */
    async function twoFeeds() {
      const project = await createProject(owner.token);
      expectData(await call('POST', projectPath(project.namespace, '/feeds'), owner.token, { name: 'orders' }), 201, 'second feed');
      return project as { namespace: string };
    }
    const publishTo = (namespace: string, feed: string, event: string) =>
      new Signalboard({ baseUrl: baseUrl(), token: key }).events.publish(namespace, feed, { event });

    it("sends only that feed's events, single and batched, over raw SSE and through the SDK", async () => {
      const project = await twoFeeds();
      const raw = await RawStream.open(`${streamUrl(project.namespace)}?feed=orders`, { token: key });
      const everything = await RawStream.open(streamUrl(project.namespace), { token: key });
      const controller = new AbortController();
      let opened = false;
      const sdk = consume(
        new Signalboard({ baseUrl: baseUrl(), token: key }).events.stream(project.namespace, {
          feed: 'orders',
          signal: controller.signal,
          onOpen: () => (opened = true),
        }),
      );
      try {
        expect(raw.response.status).to.equal(200);
        for (const stream of [raw, everything]) await stream.until(() => stream.retry !== undefined, 5_000);
        await eventually(() => opened, 5_000, 'the SDK stream');
        await new Promise((resolve) => setTimeout(resolve, 100));
        const published = [
          await publishTo(project.namespace, 'general', 'g1'),
          await publishTo(project.namespace, 'orders', 'o1'),
          await publishTo(project.namespace, 'general', 'g2'),
          ...expectData(
            await call('POST', projectPath(project.namespace, '/events'), key, {
              events: [
                { feed: 'orders', event: 'o2' },
                { feed: 'general', event: 'g3' },
                { feed: 'orders', event: 'o3' },
              ],
            }),
            201,
          ).items,
          await publishTo(project.namespace, 'general', 'g4'),
        ] as Event[];
        const orders = published.filter((event) => event.feed === 'orders');
        // Every event reaches the unfiltered stream; by then the narrowed ones have had theirs.
        await everything.waitForEvents(published.length);
        await raw.waitForEvents(orders.length);
        await eventually(() => sdk.events.length >= orders.length, 5_000, 'the orders through the SDK');
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(messageIds(everything.events)).to.deep.equal(ids(published));
        expect(messageIds(raw.events)).to.deep.equal(ids(orders));
        expect(raw.events.map((m) => JSON.parse(m.data))).to.deep.equal(orders);
        expect(sdk.events).to.deep.equal(orders);
      } finally {
        raw.close();
        everything.close();
        controller.abort();
        await abortedEnd(sdk.done);
      }
    });

    it('stays narrowed when resuming with Last-Event-ID, raw and when the SDK reconnects after a cut', async () => {
      const project = await twoFeeds();
      const first = await publishTo(project.namespace, 'general', 'before');
      const missed = [
        await publishTo(project.namespace, 'orders', 'o1'),
        await publishTo(project.namespace, 'general', 'g1'),
        await publishTo(project.namespace, 'orders', 'o2'),
      ];
      const raw = await RawStream.open(`${streamUrl(project.namespace)}?feed=orders`, { token: key, lastEventId: first.id });
      try {
        await raw.waitForEvents(2);
        const live = [await publishTo(project.namespace, 'general', 'g2'), await publishTo(project.namespace, 'orders', 'o3')];
        await raw.waitForEvents(3);
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(messageIds(raw.events)).to.deep.equal(ids([...missed, ...live].filter((event) => event.feed === 'orders')));
      } finally {
        raw.close();
      }

      // The SDK's first connection is cut after its first event; it reconnects with Last-Event-ID and the same feed.
      const urls: string[] = [];
      const cutAfterFirstEvent: typeof fetch = async (input, init) => {
        urls.push(input instanceof Request ? input.url : input.toString());
        const response = await fetch(input, init);
        if (urls.length > 1 || !response.body) return response;
        const reader = response.body.getReader();
        const body = new ReadableStream<Uint8Array>({
          async pull(out) {
            const { done, value } = await reader.read();
            if (done) return out.close();
            out.enqueue(value);
            if (Buffer.from(value).toString('utf8').includes('event: event')) {
              await reader.cancel();
              out.error(new TypeError('terminated'));
            }
          },
          cancel: () => reader.cancel(),
        });
        return new Response(body, { status: response.status, headers: response.headers });
      };
      const controller = new AbortController();
      const opens: (string | undefined)[] = [];
      const sdk = consume(
        streamEvents({
          baseUrl: baseUrl(),
          token: key,
          namespace: project.namespace,
          feed: 'orders',
          signal: controller.signal,
          fetch: cutAfterFirstEvent,
          onOpen: ({ lastEventId }) => opens.push(lastEventId),
        }),
      );
      try {
        await eventually(() => opens.length === 1, 5_000, 'the first connection');
        await new Promise((resolve) => setTimeout(resolve, 100));
        const o4 = await publishTo(project.namespace, 'orders', 'o4');
        await eventually(() => sdk.events.length === 1, 5_000, 'the first event');
        // Published while the SDK waits to reconnect: it gets the order, not the general event.
        const meanwhile = [await publishTo(project.namespace, 'general', 'g5'), await publishTo(project.namespace, 'orders', 'o5')];
        await eventually(() => sdk.events.length === 2, 10_000, 'the event published while away');
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(sdk.events).to.deep.equal([o4, meanwhile[1]]);
        expect(opens).to.deep.equal([undefined, o4.id]);
        expect(urls).to.have.length(2);
        for (const url of urls) expect(new URL(url).searchParams.get('feed')).to.equal('orders');
      } finally {
        controller.abort();
        await abortedEnd(sdk.done);
      }
    });

    it('answers 404 not_found to a feed the project does not have, as the other feed routes do; the SDK throws it', async () => {
      const project = await twoFeeds();
      const other = await createProject(owner.token);
      expectData(await call('POST', projectPath(other.namespace, '/feeds'), owner.token, { name: 'elsewhere' }), 201);
      for (const feed of ['nope', 'elsewhere']) {
        const answer = await call('GET', `${streamPath(project.namespace)}?feed=${feed}`, key);
        expectError(answer, 404, 'not_found');
        // The same answer as publishing to that feed.
        const publishing = await call('POST', projectPath(project.namespace, `/feeds/${feed}/events`), key, { event: 'x' });
        expect(answer.json).to.deep.equal(publishing.json);
      }
      const refusal = (await consume(
        streamEvents({ baseUrl: baseUrl(), token: key, namespace: project.namespace, feed: 'nope' }),
      ).done.catch((error: unknown) => error)) as SignalboardError;
      expect(refusal).to.be.instanceOf(SignalboardError);
      expect([refusal.status, refusal.code, refusal.message]).to.deep.equal([404, 'not_found', 'No feed with this name in this project.']);
    });

    it('refuses a feed that is no feed name (400 invalid_request at /query/feed); the SDK throws it', async () => {
      const project = await twoFeeds();
      for (const feed of ['', 'Orders', 'no%20spaces', '-orders', 'x'.repeat(41), encodeURIComponent('ördern')]) {
        const answer = await call('GET', `${streamPath(project.namespace)}?feed=${feed}`, key);
        expectError(answer, 400, 'invalid_request', feed);
        expect(answer.json.error.details.map((d: { path: string }) => d.path)).to.include('/query/feed');
      }
      const refusal = (await consume(
        streamEvents({ baseUrl: baseUrl(), token: key, namespace: project.namespace, feed: 'Orders' }),
      ).done.catch((error: unknown) => error)) as SignalboardError;
      expect([refusal.status, refusal.code]).to.deep.equal([400, 'invalid_request']);
    });
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

  describe('two service instances on one PostgreSQL database', () => {
    let other: Awaited<ReturnType<typeof startExtraServer>> | undefined;
    before(async function () {
      if (database().kind !== 'postgresql') {
        console.log(
          '      (skipped: the embedded database has a single owner process, so a second instance cannot share it; run with DATABASE_URL)',
        );
        this.skip();
      }
      other = await startExtraServer();
    });
    after(async () => {
      await other?.close();
    });

    it(
      'a client streaming from instance B receives, in order and exactly once, 200 events published to instance A; and after a forced ' +
        'disconnect, resuming with Last-Event-ID loses and doubles nothing',
      async function () {
        this.timeout(120_000);
        const project = await createProject(owner.token);
        const a = baseUrl();
        const b = other!.url;

        // 1. 200 events, published one after another to A, streamed from B.
        const stream = await RawStream.open(streamUrl(project.namespace, b), { token: key });
        await stream.until(() => stream.retry !== undefined, 5_000);
        const sentAt = new Map<string, number>();
        const roundTrips: number[] = [];
        const published: Event[] = [];
        for (let i = 0; i < 200; i++) {
          const started = performance.now();
          const event = await publish(a, key, project.namespace, { event: `batch-1 ${i}` });
          roundTrips.push(performance.now() - started);
          sentAt.set(event.id, started);
          published.push(event);
        }
        await stream.waitForEvents(200, 20_000);
        await new Promise((resolve) => setTimeout(resolve, 300));
        stream.close();
        expect(messageIds(stream.events)).to.deep.equal(ids(published));
        expect(stream.events.map((m) => JSON.parse(m.data))).to.deep.equal(published);
        const latencies = stream.events.map((m) => m.at - sentAt.get(m.id!)!);
        const p50 = percentile(latencies, 50);
        const p99 = percentile(latencies, 99);
        console.log(
          `      publish (A) → receipt (B), 200 events: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ` +
            `${Math.max(...latencies).toFixed(1)} ms (from the start of the publish request; its own round trip: p50 ` +
            `${percentile(roundTrips, 50).toFixed(1)} ms)`,
        );
        expect(p99).to.be.below(1_000);

        // 2. Another 200, published in the background; the client is cut off after ~100 and resumes.
        const first = await RawStream.open(streamUrl(project.namespace, b), { token: key });
        await first.until(() => first.retry !== undefined, 5_000);
        const second: Event[] = [];
        const publishing = (async () => {
          for (let i = 0; i < 200; i++) second.push(await publish(a, key, project.namespace, { event: `batch-2 ${i}` }));
        })();
        await first.waitForEvents(100, 20_000);
        first.close();
        expect(await first.ended).to.equal('aborted');
        const before = first.events.length;
        const lastSeen = first.events.at(-1)!.id!;
        // Stay away a little, so that events are published while nobody listens.
        await new Promise((resolve) => setTimeout(resolve, 250));
        const publishedWhileAway = second.length - before;
        const resumed = await RawStream.open(streamUrl(project.namespace, b), { token: key, lastEventId: lastSeen });
        await publishing;
        await resumed.waitForEvents(200 - before, 20_000);
        await new Promise((resolve) => setTimeout(resolve, 300));
        resumed.close();
        const union = [...messageIds(first.events), ...messageIds(resumed.events)];
        expect(union).to.deep.equal(ids(second));
        expect(new Set(union).size).to.equal(200);
        console.log(
          `      cut off after ${before} events; ${publishedWhileAway} published while away; ${resumed.events.length} received after ` +
            `resuming`,
        );
        expect(publishedWhileAway).to.be.above(0);
      },
    );

    it(
      'many publishers on both instances at once (single events and batches, some batches refused): clients of A and of B, and one ' +
        'that moves from B to A with Last-Event-ID, each receive every stored event once, in the same id order, batches unbroken',
      async function () {
        this.timeout(180_000);
        const project = await createProject(owner.token);
        expectData(await call('POST', projectPath(project.namespace, '/feeds'), owner.token, { name: 'orders' }), 201, 'second feed');
        const origins = [baseUrl(), other!.url];
        const onA = await RawStream.open(streamUrl(project.namespace), { token: key });
        const onB = await RawStream.open(streamUrl(project.namespace, other!.url), { token: owner.token });
        const moving = await RawStream.open(streamUrl(project.namespace, other!.url), { token: key });
        for (const stream of [onA, onB, moving]) await stream.until(() => stream.retry !== undefined, 5_000);

        // Two clients that reconnect again and again, to either instance in turn, each time with the last
        // id they got: every reconnection reads "the events after X" at a moment of its own, the read
        // that an id committed out of order would fool.
        let publishing = true;
        let expected: string[] = [];
        const hopper = async (first: number) => {
          const hopped: string[] = [];
          const deadline = Date.now() + 60_000;
          for (let n = first; publishing || hopped.length < expected.length; n++) {
            if (Date.now() > deadline) throw new Error(`a reconnecting client got ${hopped.length} of ${expected.length} events`);
            const lastEventId = hopped.at(-1) ?? '00000000-0000-0000-0000-000000000000';
            const stream = await RawStream.open(streamUrl(project.namespace, origins[n % 2]), { token: key, lastEventId });
            await stream.until(() => stream.events.length > 0, 50).catch(() => undefined);
            stream.close();
            hopped.push(...stream.events.map((m) => m.id!));
          }
          return hopped;
        };
        const hoppers = [hopper(0), hopper(1)];

        // 600 requests from 60 connections, half to each instance: single events, batches of 2–9
        // events across both feeds, and every 13th a batch naming a feed the project does not have.
        const stored: Event[][] = [];
        let refused = 0;
        let moved: RawStream | undefined;
        await inParallel(600, 60, async (i) => {
          const origin = origins[i % 2]!;
          if (i % 13 === 0) {
            const events = [
              { feed: 'general', event: `refused ${i}` },
              { feed: 'nowhere', event: `refused ${i}` },
            ];
            expectError(await callAt(origin, 'POST', projectPath(project.namespace, '/events'), key, { events }), 404, 'not_found');
            refused += 1;
          } else if (i % 4 === 0) {
            const events = Array.from({ length: 2 + (i % 8) }, (_, j) => ({
              feed: j % 2 ? 'orders' : 'general',
              event: `batch ${i}.${j}`,
            }));
            stored.push(expectData(await callAt(origin, 'POST', projectPath(project.namespace, '/events'), key, { events }), 201).items);
          } else {
            const path = projectPath(project.namespace, `/feeds/${i % 3 ? 'general' : 'orders'}/events`);
            stored.push([expectData(await callAt(origin, 'POST', path, key, { event: `single ${i}` }), 201)]);
          }
          // Half-way, the moving client leaves B and resumes on A from the last event it got.
          if (i === 300) {
            moving.close();
            moved = await RawStream.open(streamUrl(project.namespace), { token: key, lastEventId: moving.events.at(-1)?.id ?? '' });
          }
        });
        const published = stored.flat();
        expected = ids(published).sort();
        publishing = false;
        for (const hopped of await Promise.all(hoppers)) expect(hopped).to.deep.equal(expected);
        for (const stream of [onA, onB]) await stream.waitForEvents(expected.length, 30_000);
        await moved!.waitForEvents(expected.length - moving.events.length, 30_000);
        await new Promise((resolve) => setTimeout(resolve, 300));
        for (const stream of [onA, onB, moved!]) stream.close();

        // 47 refused batches; 138 stored batches of 552 events in all; 415 single events.
        expect(refused).to.equal(47);
        expect(stored).to.have.length(138 + 415);
        expect(published).to.have.length(552 + 415);
        expect(await count('select count(*)::int as n from events where project_id = ?', [project.id])).to.equal(expected.length);
        expect(await count(`select count(*)::int as n from events where project_id = ? and event like 'refused%'`, [project.id])).to.equal(
          0,
        );
        expect(messageIds(onA.events)).to.deep.equal(expected);
        expect(messageIds(onB.events)).to.deep.equal(expected);
        expect([...messageIds(moving.events), ...messageIds(moved!.events)]).to.deep.equal(expected);
        const byId = new Map(published.map((event) => [event.id, event]));
        expect(onB.events.map((m) => JSON.parse(m.data))).to.deep.equal(expected.map((id) => byId.get(id)));
        // A request's events are stored together: consecutive in the project's id order, in the order sent.
        const position = new Map(expected.map((id, n) => [id, n]));
        for (const events of stored) {
          const at = events.map((event) => position.get(event.id)!);
          expect(at, events[0]!.event).to.deep.equal(at.map((_, j) => at[0]! + j));
        }
      },
    );
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
