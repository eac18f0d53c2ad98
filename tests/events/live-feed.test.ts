/**
 * The live stream narrowed to one feed (`feed`): only that feed's events, raw and through the SDK,
 * kept when resuming, and the refusals of a feed the project does not have or that is no feed name.
 */
import { expect } from 'chai';
import { Signalboard, SignalboardError, streamEvents, type Event } from '../../sdk/src/index.js';
import { baseUrl } from '../support/harness.js';
import type { TestUser } from '../support/accounts.js';
import { call, expectData, expectError } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { eventually, RawStream } from '../support/sse.js';
import { abortedEnd, consume, ids, messageIds, streamingOwner, streamPath, streamUrl } from './live-support.js';

describe('live event stream', () => {
  let owner: TestUser, key: string;
  before(async () => ({ owner, key } = await streamingOwner()));

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
});
