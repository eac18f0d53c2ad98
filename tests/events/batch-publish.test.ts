/**
 * Batch publication (`POST /v1/projects/{namespace}/events`): the events stored in the order sent,
 * ids above everything before; all or nothing (a bad event, an unknown feed, too many events);
 * members only, with an API token as with a session; delivered once and in order on a live stream.
 */
import { expect } from 'chai';
import { baseUrl, count } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid, ISO_UTC, UUID7 } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { RawStream } from '../support/sse.js';

const batchPath = (namespace: string) => projectPath(namespace, '/events');

async function eventCount(projectId: string): Promise<number> {
  return count('select count(*)::int as n from events where project_id = ?', [projectId]);
}

async function newFeed(token: string, namespace: string, name: string): Promise<void> {
  expectData(await call('POST', projectPath(namespace, '/feeds'), token, { name }), 201, 'create feed');
}

describe('batch publish', () => {
  let owner: TestUser;
  let stranger: TestUser;
  let key: string;
  before(async () => {
    [owner, stranger] = await Promise.all([signUp(), signUp()]);
    key = await apiToken(owner.token);
  });

  it('stores the events in the order sent (201, items), ids increasing and above an earlier event, readable by the list', async () => {
    const project = await createProject(owner.token);
    await newFeed(owner.token, project.namespace, 'orders');
    const before = expectData(
      await call('POST', projectPath(project.namespace, '/feeds/general/events'), owner.token, { event: 'Before' }),
      201,
    );
    const timestamp = '2026-01-02T03:04:05.000Z';
    const sent = [
      {
        feed: 'orders',
        event: 'Order placed',
        description: 'Order #1',
        emoji: '🛒',
        tags: { total: 12.5, paid: true, plan: 'pro' },
        timestamp,
      },
      { feed: 'general', event: 'Signed up' },
      { feed: 'orders', event: 'Order shipped', description: null, emoji: null, tags: {} },
    ];
    const data = expectData(await call('POST', batchPath(project.namespace), owner.token, { events: sent }), 201);
    expect(Object.keys(data)).to.deep.equal(['items']);
    const items = data.items as Record<string, any>[];
    expect(items.map((e) => [e.feed, e.event])).to.deep.equal(sent.map((e) => [e.feed, e.event]));
    expect(items[0]).to.deep.equal({
      id: items[0]!.id,
      feed: 'orders',
      event: 'Order placed',
      description: 'Order #1',
      emoji: '🛒',
      tags: { total: 12.5, paid: true, plan: 'pro' },
      user_id: null,
      notify: false,
      timestamp,
      created_at: items[0]!.created_at,
    });
    expect(items[1]).to.include({ description: null, emoji: null });
    expect(items[1]!.tags).to.deep.equal({});
    const ids = items.map((e) => e.id as string);
    for (const id of ids) expect(id).to.match(UUID7);
    for (const item of items) expect(item.created_at).to.match(ISO_UTC);
    expect(ids[0]! > before.id, 'the first id is above the earlier event').to.equal(true);
    expect([...ids].sort(), 'ids increase in the order sent').to.deep.equal(ids);
    expect(new Set(ids).size).to.equal(ids.length);

    const list = expectData(await call('GET', `${batchPath(project.namespace)}?limit=10`, owner.token));
    expect(list.items).to.deep.equal([...items].reverse().concat([before]));
    expect(await eventCount(project.id)).to.equal(4);
  });

  it('stores text verbatim, whatever it holds: quotes, backslashes, braces, commas, NULL spelled out, emoji', async () => {
    const project = await createProject(owner.token);
    const tricky = ['a "quoted", {braced} \\ back\\slash', 'NULL', '', ' spaced ', '{}', '\\N', '🎉 ünïcödé'];
    const events = tricky.map((text, i) => ({
      feed: 'general',
      event: `e${i} ${text}`,
      description: text,
      emoji: text.slice(0, 8),
      tags: { value: text, n: i, 'big-n': 1.5e300, yes: true },
    }));
    const data = expectData(await call('POST', batchPath(project.namespace), key, { events }), 201);
    const shape = (e: Record<string, unknown>) => [e.feed, e.event, e.description, e.emoji, e.tags];
    expect(data.items.map(shape)).to.deep.equal(events.map(shape));
    const list = expectData(await call('GET', `${batchPath(project.namespace)}?limit=20`, owner.token));
    expect([...list.items].reverse().map(shape)).to.deep.equal(events.map(shape));
  });

  it('is all or nothing: a bad third event refuses the batch with 400 pointing into it, and stores nothing', async () => {
    const project = await createProject(owner.token);
    const path = batchPath(project.namespace);
    const good = { feed: 'general', event: 'Fine' };
    // The contract's own rules (here an empty event name) …
    expectInvalid(await call('POST', path, key, { events: [good, good, { feed: 'general', event: '' }] }), '/body/events/2/event');
    // … and the domain's tag rules point into the event too.
    expectInvalid(
      await call('POST', path, key, { events: [good, good, { feed: 'general', event: 'x', tags: { 'Not-A-Key': 1 } }] }),
      '/body/events/2/tags/Not-A-Key',
    );
    const manyTags = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`t${i}`, i]));
    expectInvalid(
      await call('POST', path, key, { events: [good, good, { feed: 'general', event: 'x', tags: manyTags }] }),
      '/body/events/2/tags',
    );
    expectInvalid(await call('POST', path, key, { events: [good, good, { ...good, extra: 1 }] }), '/body/events/2/extra');
    expect(await eventCount(project.id)).to.equal(0);
  });

  it('refuses an empty batch and one of 1,001 events (400), storing nothing', async () => {
    const project = await createProject(owner.token);
    const path = batchPath(project.namespace);
    expectInvalid(await call('POST', path, key, { events: [] }), '/body/events');
    const events = Array.from({ length: 1001 }, (_, i) => ({ feed: 'general', event: `e${i}` }));
    expectInvalid(await call('POST', path, key, { events }), '/body/events');
    expect(await eventCount(project.id)).to.equal(0);
    // 1,000 is the most, and fits the body cap.
    const data = expectData(await call('POST', path, key, { events: events.slice(0, 1000) }), 201);
    expect(data.items).to.have.length(1000);
    expect(data.items.map((e: { event: string }) => e.event)).to.deep.equal(events.slice(0, 1000).map((e) => e.event));
    expect(await eventCount(project.id)).to.equal(1000);
  });

  it('answers 413 to a batch larger than the body cap, storing nothing', async () => {
    const project = await createProject(owner.token);
    const events = Array.from({ length: 300 }, () => ({ feed: 'general', event: 'x', description: 'd'.repeat(4000) }));
    expectError(await call('POST', batchPath(project.namespace), key, { events }), 413, 'payload_too_large');
    expect(await eventCount(project.id)).to.equal(0);
  });

  it('answers 404 when any event names a feed the project does not have, storing nothing', async () => {
    const project = await createProject(owner.token);
    const answer = await call('POST', batchPath(project.namespace), key, {
      events: [
        { feed: 'general', event: 'Fine' },
        { feed: 'no-such-feed', event: 'Lost' },
      ],
    });
    expectError(answer, 404, 'not_found');
    expect(await eventCount(project.id)).to.equal(0);
  });

  it('answers 404 to non-members (session or API token) and 401 without a credential, storing nothing', async () => {
    const project = await createProject(owner.token);
    const body = { events: [{ feed: 'general', event: 'Intrusion' }] };
    expectError(await call('POST', batchPath(project.namespace), stranger.token, body), 404, 'not_found');
    expectError(await call('POST', batchPath(project.namespace), await apiToken(stranger.token), body), 404, 'not_found');
    expectError(await call('POST', batchPath(project.namespace), undefined, body), 401, 'unauthenticated');
    expect(await eventCount(project.id)).to.equal(0);
  });

  it("takes a member's API token as well as a session", async () => {
    const project = await createProject(owner.token);
    const body = { events: [{ feed: 'general', event: 'By token' }] };
    expect(expectData(await call('POST', batchPath(project.namespace), key, body), 201).items).to.have.length(1);
    expect(expectData(await call('POST', batchPath(project.namespace), owner.token, body), 201).items).to.have.length(1);
    expect(await eventCount(project.id)).to.equal(2);
  });

  it('delivers a batch on an open live stream once each, in id order, after the events before it', async () => {
    const project = await createProject(owner.token);
    await newFeed(owner.token, project.namespace, 'orders');
    const stream = await RawStream.open(baseUrl() + projectPath(project.namespace, '/events/stream'), { token: key });
    try {
      expect(stream.response.status).to.equal(200);
      await stream.until(
        () => stream.retry !== undefined,
        5_000,
        () => 'the retry line',
      );
      const single = expectData(await call('POST', projectPath(project.namespace, '/feeds/general/events'), key, { event: 'Single' }), 201);
      const events = Array.from({ length: 120 }, (_, i) => ({ feed: i % 2 ? 'orders' : 'general', event: `Batch ${i}` }));
      const batch = expectData(await call('POST', batchPath(project.namespace), key, { events }), 201).items as { id: string }[];
      const expected = [single, ...batch];
      const received = await stream.waitForEvents(expected.length);
      // Nothing more arrives: each event once.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(stream.events.map((m) => m.id)).to.deep.equal(expected.map((e) => e.id));
      expect(received.map((m) => JSON.parse(m.data))).to.deep.equal(expected);
    } finally {
      stream.close();
    }
  });
});
