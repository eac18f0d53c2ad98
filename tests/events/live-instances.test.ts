/**
 * The live stream across two service instances on one PostgreSQL database: events published to one
 * reach clients of the other in order and once, resuming and moving between instances included.
 */
import { expect } from 'chai';
import type { Event } from '../../sdk/src/index.js';
import { baseUrl, count, database, startExtraServer } from '../support/harness.js';
import type { TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { inParallel, percentile, RawStream } from '../support/sse.js';
import { ids, messageIds, publish, streamingOwner, streamUrl } from './live-support.js';

describe('live event stream', () => {
  let owner: TestUser, key: string;
  before(async () => ({ owner, key } = await streamingOwner()));

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
});
