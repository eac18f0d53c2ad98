/**
 * Who an event concerns and how to find it: `user_id` and `notify` stored and shown on every way in
 * (single, batch, the live stream's data); the events list filtered by an end user's journey, by
 * whole words (`q`), by several tags at once, and by all of them combined, with cursors; end users
 * identified (properties merged, capped at 50) and read back with their first and last event; every
 * bad filter or body a 400 that changes nothing.
 */
import { expect } from 'chai';
import { count, sql } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid } from '../support/http.js';
import { addMember, createProject, projectPath } from '../support/projects.js';

type Project = Awaited<ReturnType<typeof createProject>>;

function listPath(namespace: string, query: [string, string][]): string {
  return projectPath(namespace, `/events?${new URLSearchParams(query).toString()}`);
}

async function titles(token: string, namespace: string, query: [string, string][]): Promise<string[]> {
  return expectData(await call('GET', listPath(namespace, query), token)).items.map((e: { event: string }) => e.event);
}

describe('journeys, search and end users', () => {
  let owner: TestUser;
  let token: string;
  let project: Project;
  before(async () => {
    owner = await signUp();
    token = await apiToken(owner.token);
    project = await createProject(owner.token);
    const publish = (body: Record<string, unknown>) =>
      call('POST', projectPath(project.namespace, '/feeds/general/events'), token, body).then((a) => expectData(a, 201));
    await publish({ event: 'Signed up', user_id: 'u-1', tags: { plan: 'pro', seats: 5 }, timestamp: '2026-03-01T10:00:00Z' });
    await publish({
      event: 'Refund issued',
      description: 'Grace asked for a REFUND.',
      user_id: 'u-2',
      notify: true,
      timestamp: '2026-03-02T10:00:00Z',
    });
    await publish({ event: 'Payment failed', description: 'Card declined; refunded nothing', user_id: 'u-1', tags: { plan: 'pro' } });
    expectData(
      await call('POST', projectPath(project.namespace, '/events'), token, {
        events: [
          {
            feed: 'general',
            event: 'Upgraded',
            user_id: 'u-1',
            notify: true,
            tags: { plan: 'team', seats: 5 },
            timestamp: '2026-03-05T10:00:00Z',
          },
          { feed: 'general', event: 'Refund requested', tags: { plan: 'pro', seats: 5 } },
        ],
      }),
      201,
    );
  });

  it('stores and shows user_id and notify, null and false by default', async () => {
    const events = expectData(await call('GET', listPath(project.namespace, []), owner.token)).items;
    const shown = events.map((e: { event: string; user_id: string | null; notify: boolean }) => [e.event, e.user_id, e.notify]);
    expect(shown).to.deep.equal([
      ['Refund requested', null, false],
      ['Upgraded', 'u-1', true],
      ['Payment failed', 'u-1', false],
      ['Refund issued', 'u-2', true],
      ['Signed up', 'u-1', false],
    ]);
    const rows = await sql<{ user_id: string | null; notify: boolean }>(
      'select user_id, notify from events where project_id = ? order by id',
      [project.id],
    );
    expect(rows.map((r) => [r.user_id, r.notify])).to.deep.equal([
      ['u-1', false],
      ['u-2', true],
      ['u-1', false],
      ['u-1', true],
      [null, false],
    ]);
  });

  it('filters by one end user, newest first, walking pages with the cursor', async () => {
    expect(await titles(owner.token, project.namespace, [['user_id', 'u-1']])).to.deep.equal(['Upgraded', 'Payment failed', 'Signed up']);
    const first = expectData(
      await call(
        'GET',
        listPath(project.namespace, [
          ['user_id', 'u-1'],
          ['limit', '2'],
        ]),
        owner.token,
      ),
    );
    expect(first.items.map((e: { event: string }) => e.event)).to.deep.equal(['Upgraded', 'Payment failed']);
    const second = expectData(
      await call(
        'GET',
        listPath(project.namespace, [
          ['user_id', 'u-1'],
          ['limit', '2'],
          ['cursor', first.next_cursor],
        ]),
        owner.token,
      ),
    );
    expect(second).to.deep.equal({ items: [second.items[0]], next_cursor: null });
    expect(second.items[0].event).to.equal('Signed up');
    expect(await titles(owner.token, project.namespace, [['user_id', 'nobody']])).to.deep.equal([]);
  });

  it('finds whole words in event and description, case-insensitive, every word required', async () => {
    expect(await titles(owner.token, project.namespace, [['q', 'refund']])).to.deep.equal(['Refund requested', 'Refund issued']);
    expect(await titles(owner.token, project.namespace, [['q', 'REFUND grace']])).to.deep.equal(['Refund issued']);
    // "refunded" is another word; punctuation separates words.
    expect(await titles(owner.token, project.namespace, [['q', 'refunded']])).to.deep.equal(['Payment failed']);
    expect(await titles(owner.token, project.namespace, [['q', 'declined']])).to.deep.equal(['Payment failed']);
    expect(await titles(owner.token, project.namespace, [['q', '!!! ???']])).to.deep.equal([]);
    expect(await titles(owner.token, project.namespace, [['q', "'); drop table events; --"]])).to.deep.equal([]);
    expect(await count('select count(*)::int as n from events where project_id = ?', [project.id])).to.equal(5);
  });

  it('requires every repeated tag, and combines all filters', async () => {
    expect(await titles(owner.token, project.namespace, [['tag', 'plan:pro']])).to.deep.equal([
      'Refund requested',
      'Payment failed',
      'Signed up',
    ]);
    expect(
      await titles(owner.token, project.namespace, [
        ['tag', 'plan:pro'],
        ['tag', 'seats:5'],
      ]),
    ).to.deep.equal(['Refund requested', 'Signed up']);
    expect(
      await titles(owner.token, project.namespace, [
        ['tag', 'plan:pro'],
        ['tag', 'seats:5'],
        ['user_id', 'u-1'],
        ['feed', 'general'],
      ]),
    ).to.deep.equal(['Signed up']);
    expect(
      await titles(owner.token, project.namespace, [
        ['q', 'refund'],
        ['user_id', 'u-2'],
      ]),
    ).to.deep.equal(['Refund issued']);
  });

  it('refuses bad filters with 400', async () => {
    const ask = (query: [string, string][]) => call('GET', listPath(project.namespace, query), owner.token);
    expectInvalid(await ask([['q', 'x'.repeat(201)]]), '/query/q');
    expectInvalid(await ask([['q', '']]), '/query/q');
    expectInvalid(await ask([['user_id', 'x'.repeat(161)]]), '/query/user_id');
    expectInvalid(
      await ask([
        ['tag', 'plan:pro'],
        ['tag', 'Bad Key:1'],
      ]),
      '/query/tag/1',
    );
    expectInvalid(await ask(Array.from({ length: 21 }, (_, i): [string, string] => ['tag', `k${i}:v`])), '/query/tag');
  });

  it('refuses a user_id over 160 characters on publish, storing nothing', async () => {
    const before = await count('select count(*)::int as n from events where project_id = ?', [project.id]);
    const answer = await call('POST', projectPath(project.namespace, '/feeds/general/events'), token, {
      event: 'x',
      user_id: 'u'.repeat(161),
    });
    expectInvalid(answer, '/body/user_id');
    expectInvalid(
      await call('POST', projectPath(project.namespace, '/feeds/general/events'), token, { event: 'x', notify: 'yes' }),
      '/body/notify',
    );
    expect(await count('select count(*)::int as n from events where project_id = ?', [project.id])).to.equal(before);
  });

  describe('end users', () => {
    const userPath = (id: string, namespace = project.namespace) => projectPath(namespace, `/users/${encodeURIComponent(id)}`);

    it('shows an end user seen only in events: no properties, first and last event, count', async () => {
      const user = expectData(await call('GET', userPath('u-1'), owner.token));
      expect(user).to.include({ user_id: 'u-1', first_seen: '2026-03-01T10:00:00.000Z', event_count: 3 });
      expect(user.properties).to.deep.equal({});
      expect(Date.parse(user.last_seen)).to.be.greaterThan(Date.parse('2026-03-05T10:00:00Z'));
    });

    it('merges properties, a key sent replacing its value, and creates an end user without events', async () => {
      expectData(await call('PUT', userPath('u-2'), token, { properties: { name: 'Grace', plan: 'pro', seats: 5 } }));
      const merged = expectData(await call('PUT', userPath('u-2'), token, { properties: { plan: 'team', admin: true } }));
      expect(merged).to.deep.equal({
        user_id: 'u-2',
        properties: { name: 'Grace', plan: 'team', seats: 5, admin: true },
        first_seen: '2026-03-02T10:00:00.000Z',
        last_seen: '2026-03-02T10:00:00.000Z',
        event_count: 1,
      });
      const fresh = expectData(await call('PUT', userPath('new user / ü'), token, { properties: { plan: 'free' } }));
      expect(fresh).to.deep.equal({
        user_id: 'new user / ü',
        properties: { plan: 'free' },
        first_seen: null,
        last_seen: null,
        event_count: 0,
      });
      expect(expectData(await call('GET', userPath('new user / ü'), owner.token))).to.deep.equal(fresh);
    });

    it('caps properties at 50, per request and in all, changing nothing when refused', async () => {
      const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]));
      expectInvalid(await call('PUT', userPath('capped'), token, { properties: { ...fifty, one: 1 } }), '/body/properties');
      expect(await count("select count(*)::int as n from end_users where project_id = ? and user_id = 'capped'", [project.id])).to.equal(0);
      expectData(await call('PUT', userPath('capped'), token, { properties: fifty }));
      expectData(await call('PUT', userPath('capped'), token, { properties: { k0: 'again' } }));
      expectInvalid(await call('PUT', userPath('capped'), token, { properties: { extra: true } }), '/body/properties');
      const [row] = await sql<{ properties: Record<string, unknown> }>(
        "select properties from end_users where project_id = ? and user_id = 'capped'",
        [project.id],
      );
      expect(Object.keys(row!.properties)).to.have.length(50);
      expect(row!.properties.k0).to.equal('again');
      expectInvalid(await call('PUT', userPath('capped'), token, { properties: { 'Bad Key': 1 } }), '/body/properties/Bad Key');
      expectInvalid(await call('PUT', userPath('capped'), token, { properties: { nested: { a: 1 } } }), '/body/properties/nested');
    });

    it('answers 404 for an unknown end user and to non-members', async () => {
      expectError(await call('GET', userPath('never-seen'), owner.token), 404, 'not_found');
      const stranger = await signUp();
      expectError(await call('GET', userPath('u-1'), stranger.token), 404, 'not_found');
      expectError(await call('PUT', userPath('u-1'), stranger.token, { properties: { a: 1 } }), 404, 'not_found');
      const mate = await signUp();
      await addMember(owner.token, project.namespace, mate);
      expect((await call('GET', userPath('u-1'), mate.token)).status).to.equal(200);
    });
  });
});
