/**
 * Feeds and events: feeds listed, created, changed and deleted by members, with their
 * activity; events published with an API token, read back newest first with filters and cursors;
 * every limit of the contract refused with 400 and nothing stored; non-members see 404 everywhere.
 */
import { expect } from 'chai';
import { Signalboard, SignalboardError } from '../../sdk/src/index.js';
import { baseUrl, count, sql } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid, expectNoContent, ISO_UTC, UUID7, walk } from '../support/http.js';
import { activityRows, addMember, createProject, projectPath } from '../support/projects.js';

function feedsPath(namespace: string, feed = ''): string {
  return projectPath(namespace, `/feeds${feed ? `/${feed}` : ''}`);
}

function eventsPath(namespace: string, feed: string): string {
  return projectPath(namespace, `/feeds/${feed}/events`);
}

async function eventCount(projectId: string): Promise<number> {
  return count('select count(*)::int as n from events where project_id = ?', [projectId]);
}

async function feedNames(projectId: string): Promise<string[]> {
  return (await sql<{ name: string }>('select name from feeds where project_id = ? order by name', [projectId])).map((r) => r.name);
}

describe('feeds', () => {
  let owner: TestUser;
  let mate: TestUser;
  let stranger: TestUser;
  before(async () => {
    [owner, mate, stranger] = await Promise.all([signUp(), signUp(), signUp()]);
  });

  it('lists the feeds to every member: a new project holds general, type 0, no emoji, no description', async () => {
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    for (const user of [owner, mate]) {
      const page = expectData(await call('GET', feedsPath(project.namespace), user.token));
      expect(page).to.deep.equal({
        items: [{ id: project.feeds[0].id, name: 'general', description: null, emoji: null, type: 0 }],
        next_cursor: null,
      });
    }
  });

  it('creates a feed (201, exact shape, activity feed.created) and lists it newest first', async () => {
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    const feed = expectData(
      await call('POST', feedsPath(project.namespace), mate.token, { name: 'signups', description: 'New accounts', emoji: '🎉' }),
      201,
    );
    expect(feed).to.deep.equal({ id: feed.id, name: 'signups', description: 'New accounts', emoji: '🎉', type: 0 });
    expect(feed.id).to.match(UUID7);
    const bare = expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'p-9' }), 201);
    expect(bare).to.deep.equal({ id: bare.id, name: 'p-9', description: null, emoji: null, type: 0 });

    const page = expectData(await call('GET', feedsPath(project.namespace), owner.token));
    expect(page.items.map((f: { name: string }) => f.name)).to.deep.equal(['p-9', 'signups', 'general']);
    const rows = await sql('select name, description, emoji, type from feeds where id = ?', [feed.id]);
    expect(rows).to.deep.equal([{ name: 'signups', description: 'New accounts', emoji: '🎉', type: 0 }]);

    const activity = await activityRows(project.id);
    const created = activity.filter((a) => a.type === 'feed.created');
    expect(created.map((a) => [a.data.feed, a.actor_id])).to.deep.equal([
      ['p-9', owner.id],
      ['signups', mate.id],
    ]);
  });

  it('refuses a name another feed of the project has (409 feed_name_taken); another project may use it', async () => {
    const project = await createProject(owner.token);
    expectError(await call('POST', feedsPath(project.namespace), owner.token, { name: 'general' }), 409, 'feed_name_taken');
    expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'orders' }), 201);
    expectError(await call('POST', feedsPath(project.namespace), owner.token, { name: 'orders' }), 409, 'feed_name_taken');
    expect(await feedNames(project.id)).to.deep.equal(['general', 'orders']);
    const other = await createProject(owner.token);
    expectData(await call('POST', feedsPath(other.namespace), owner.token, { name: 'orders' }), 201);
  });

  it('refuses bad names and fields with 400 invalid_request and stores nothing', async () => {
    const project = await createProject(owner.token);
    for (const name of ['', 'Upper', 'under_score', '-lead', 'trail-', 'a'.repeat(41), 'sp ace', 'é']) {
      expectInvalid(await call('POST', feedsPath(project.namespace), owner.token, { name }), '/body/name', JSON.stringify(name));
    }
    expectInvalid(await call('POST', feedsPath(project.namespace), owner.token, {}), '/body/name', 'no name');
    expectInvalid(
      await call('POST', feedsPath(project.namespace), owner.token, { name: 'ok', description: 'd'.repeat(501) }),
      '/body/description',
    );
    expectInvalid(await call('POST', feedsPath(project.namespace), owner.token, { name: 'ok', emoji: 'e'.repeat(33) }), '/body/emoji');
    expectInvalid(await call('POST', feedsPath(project.namespace), owner.token, { name: 'ok', type: 1 }), '/body/type');
    expectError(
      await call('POST', feedsPath(project.namespace), owner.token, { name: 'ok', colour: 'red' }),
      400,
      'invalid_request',
      'unknown field',
    );
    expectInvalid(await call('PATCH', feedsPath(project.namespace, 'general'), owner.token, { name: 'Bad' }), '/body/name');
    // 40 characters is the longest name; a one-character name is fine.
    expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'a'.repeat(40) }), 201);
    expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'x' }), 201);
    expect(await feedNames(project.id)).to.deep.equal(['a'.repeat(40), 'general', 'x']);
  });

  it('renames a feed and changes its description and emoji (200, activity feed.updated with the fields)', async () => {
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    const feed = expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'payments' }), 201);
    const renamed = expectData(
      await call('PATCH', feedsPath(project.namespace, 'payments'), mate.token, { name: 'billing', description: 'Money', emoji: '💸' }),
    );
    expect(renamed).to.deep.equal({ id: feed.id, name: 'billing', description: 'Money', emoji: '💸', type: 0 });
    // The old name is gone, the new one answers.
    expectError(await call('PATCH', feedsPath(project.namespace, 'payments'), owner.token, { description: 'x' }), 404, 'not_found');
    const changed = expectData(
      await call('PATCH', feedsPath(project.namespace, 'billing'), owner.token, { description: 'Payments', emoji: '💶' }),
    );
    expect(changed).to.deep.equal({ id: feed.id, name: 'billing', description: 'Payments', emoji: '💶', type: 0 });
    // The same values again change nothing and write no activity.
    expectData(await call('PATCH', feedsPath(project.namespace, 'billing'), owner.token, { name: 'billing', emoji: '💶' }));
    // Renaming onto another feed's name is a conflict, and changes nothing.
    expectError(await call('PATCH', feedsPath(project.namespace, 'billing'), owner.token, { name: 'general' }), 409, 'feed_name_taken');
    expect(await feedNames(project.id)).to.deep.equal(['billing', 'general']);

    const updates = (await activityRows(project.id)).filter((a) => a.type === 'feed.updated').reverse();
    expect(updates.map((a) => ({ actor: a.actor_id, data: a.data }))).to.deep.equal([
      { actor: mate.id, data: { feed: 'billing', fields: ['name', 'description', 'emoji'], from: 'payments' } },
      { actor: owner.id, data: { feed: 'billing', fields: ['description', 'emoji'] } },
    ]);
  });

  it('clears description and emoji with null (create, update and publish)', async () => {
    const project = await createProject(owner.token);
    const feed = expectData(
      await call('POST', feedsPath(project.namespace), owner.token, { name: 'n', description: null, emoji: null }),
      201,
    );
    expect(feed).to.deep.equal({ id: feed.id, name: 'n', description: null, emoji: null, type: 0 });
    expectData(await call('PATCH', feedsPath(project.namespace, 'n'), owner.token, { description: 'd', emoji: '🎉' }));
    const cleared = expectData(await call('PATCH', feedsPath(project.namespace, 'n'), owner.token, { description: null, emoji: null }));
    expect(cleared).to.deep.equal({ id: feed.id, name: 'n', description: null, emoji: null, type: 0 });
    const event = expectData(
      await call('POST', eventsPath(project.namespace, 'n'), owner.token, { event: 'x', description: null, emoji: null }),
      201,
    );
    expect([event.description, event.emoji]).to.deep.equal([null, null]);
  });

  it('deletes a feed with its events (204, activity feed.deleted); the other feeds keep theirs', async () => {
    const project = await createProject(owner.token);
    const key = await apiToken(owner.token);
    expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'doomed' }), 201);
    for (let i = 0; i < 3; i++) expectData(await call('POST', eventsPath(project.namespace, 'doomed'), key, { event: `gone ${i}` }), 201);
    expectData(await call('POST', eventsPath(project.namespace, 'general'), key, { event: 'stays' }), 201);
    expect(await eventCount(project.id)).to.equal(4);

    expectNoContent(await call('DELETE', feedsPath(project.namespace, 'doomed'), key));
    expect(await feedNames(project.id)).to.deep.equal(['general']);
    expect((await sql('select event from events where project_id = ?', [project.id])).map((r) => r.event)).to.deep.equal(['stays']);
    const deleted = (await activityRows(project.id)).filter((a) => a.type === 'feed.deleted');
    expect(deleted.map((a) => ({ actor: a.actor_id, data: a.data }))).to.deep.equal([{ actor: owner.id, data: { feed: 'doomed' } }]);
    expectError(await call('DELETE', feedsPath(project.namespace, 'doomed'), owner.token), 404, 'not_found', 'deleted twice');
    expectError(
      await call('POST', eventsPath(project.namespace, 'doomed'), key, { event: 'late' }),
      404,
      'not_found',
      'publish to a deleted feed',
    );
  });

  it('refuses to delete the last feed (409 last_feed); it stays, with its events', async () => {
    const project = await createProject(owner.token);
    expectData(await call('POST', eventsPath(project.namespace, 'general'), owner.token, { event: 'kept' }), 201);
    expectError(await call('DELETE', feedsPath(project.namespace, 'general'), owner.token), 409, 'last_feed');
    expect(await feedNames(project.id)).to.deep.equal(['general']);
    expect(await eventCount(project.id)).to.equal(1);
    expect((await activityRows(project.id)).filter((a) => a.type === 'feed.deleted')).to.deep.equal([]);
  });

  it('two concurrent deletes of the last two feeds: one 204, one 409 last_feed, one feed left', async () => {
    for (let round = 0; round < 3; round++) {
      const project = await createProject(owner.token);
      expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'second' }), 201);
      const answers = await Promise.all([
        call('DELETE', feedsPath(project.namespace, 'general'), owner.token),
        call('DELETE', feedsPath(project.namespace, 'second'), owner.token),
      ]);
      expect(answers.map((a) => a.status).sort(), answers.map((a) => a.text).join(' | ')).to.deep.equal([204, 409]);
      expectError(
        answers.find((a) => a.status === 409)!,
        409,
        'last_feed',
      );
      const left = await feedNames(project.id);
      expect(left).to.have.length(1);
      expect((await activityRows(project.id)).filter((a) => a.type === 'feed.deleted')).to.have.length(1);
    }
  });

  it('answers 404 to non-members on every feed route, and changes nothing', async () => {
    const project = await createProject(owner.token);
    const strangerKey = await apiToken(stranger.token);
    for (const token of [stranger.token, strangerKey]) {
      expectError(await call('GET', feedsPath(project.namespace), token), 404, 'not_found', 'list');
      expectError(await call('POST', feedsPath(project.namespace), token, { name: 'intruder' }), 404, 'not_found', 'create');
      expectError(await call('PATCH', feedsPath(project.namespace, 'general'), token, { name: 'mine' }), 404, 'not_found', 'update');
      expectError(await call('DELETE', feedsPath(project.namespace, 'general'), token), 404, 'not_found', 'delete');
    }
    // The same answer as for a project that does not exist.
    expectError(await call('GET', feedsPath('no-such-project-here'), stranger.token), 404, 'not_found');
    expectError(await call('GET', feedsPath(project.namespace)), 401, 'unauthenticated');
    expect(await feedNames(project.id)).to.deep.equal(['general']);
  });
});

describe('events', () => {
  let owner: TestUser;
  let stranger: TestUser;
  let key: string;
  before(async () => {
    [owner, stranger] = await Promise.all([signUp(), signUp()]);
    key = await apiToken(owner.token);
  });

  it('publishes with an API token: 201, the Event exactly, a row in events', async () => {
    const project = await createProject(owner.token);
    const before = Date.now();
    const answer = await call('POST', eventsPath(project.namespace, 'general'), key, {
      event: 'New signup',
      description: 'ada@example.com signed up',
      emoji: '🎉',
      tags: { plan: 'pro', seats: 3, trial: false, 'utm-source': 'newsletter' },
      timestamp: '2024-01-02T03:04:05.678Z',
    });
    const event = expectData(answer, 201);
    expect(event).to.deep.equal({
      id: event.id,
      feed: 'general',
      event: 'New signup',
      description: 'ada@example.com signed up',
      emoji: '🎉',
      tags: { plan: 'pro', seats: 3, trial: false, 'utm-source': 'newsletter' },
      user_id: null,
      notify: false,
      timestamp: '2024-01-02T03:04:05.678Z',
      created_at: event.created_at,
    });
    expect(event.id).to.match(UUID7);
    expect(event.created_at).to.match(ISO_UTC);
    expect(Date.parse(event.created_at)).to.be.within(before - 1000, Date.now() + 1000);

    const rows = await sql<Record<string, any>>(
      'select e.project_id, f.name as feed, e.event, e.description, e.emoji, e.tags, e.timestamp from events e join feeds f on f.id = ' +
        'e.feed_id where e.id = ?',
      [event.id],
    );
    expect(rows).to.have.length(1);
    const row = rows[0]!;
    expect(row.project_id).to.equal(project.id);
    expect(row.feed).to.equal('general');
    expect([row.event, row.description, row.emoji]).to.deep.equal(['New signup', 'ada@example.com signed up', '🎉']);
    expect(typeof row.tags === 'string' ? JSON.parse(row.tags) : row.tags).to.deep.equal({
      plan: 'pro',
      seats: 3,
      trial: false,
      'utm-source': 'newsletter',
    });
    expect(new Date(row.timestamp).toISOString()).to.equal('2024-01-02T03:04:05.678Z');
  });

  it('publishes the bare minimum: no description, emoji or tags, timestamp the time of publication', async () => {
    const project = await createProject(owner.token);
    const event = expectData(await call('POST', eventsPath(project.namespace, 'general'), key, { event: 'x' }), 201);
    expect(event).to.deep.equal({
      id: event.id,
      feed: 'general',
      event: 'x',
      description: null,
      emoji: null,
      tags: {},
      user_id: null,
      notify: false,
      timestamp: event.created_at,
      created_at: event.created_at,
    });
  });

  it('the SDK publishes: answers the Event, and throws a SignalboardError with status, code and message', async () => {
    const project = await createProject(owner.token);
    const sb = new Signalboard({ baseUrl: baseUrl(), token: key });
    const event = await sb.events.publish(project.namespace, 'general', { event: 'From the SDK', tags: { n: 1 } });
    expect(event).to.deep.include({ feed: 'general', event: 'From the SDK', tags: { n: 1 }, description: null, emoji: null });
    const [row] = await sql('select event from events where id = ?', [event.id]);
    expect(row).to.deep.equal({ event: 'From the SDK' });

    const refusal = await sb.events.publish(project.namespace, 'general', { event: '' }).catch((e: unknown) => e);
    expect(refusal).to.be.instanceOf(SignalboardError);
    const error = refusal as SignalboardError;
    expect([error.status, error.code]).to.deep.equal([400, 'invalid_request']);
    expect(error.message).to.be.a('string').and.not.equal('');
    expect(error.details?.map((d) => d.path)).to.include('/body/event');

    const missing = (await sb.events.publish(project.namespace, 'nope', { event: 'x' }).catch((e: unknown) => e)) as SignalboardError;
    expect([missing.status, missing.code]).to.deep.equal([404, 'not_found']);
    const anonymous = new Signalboard({ baseUrl: baseUrl() });
    const refused = (await anonymous.events
      .publish(project.namespace, 'general', { event: 'x' })
      .catch((e: unknown) => e)) as SignalboardError;
    expect([refused.status, refused.code]).to.deep.equal([401, 'unauthenticated']);
    expect(await eventCount(project.id)).to.equal(1);
  });

  it('reads events back newest first, filtered by feed and by tag (string, number and boolean values)', async () => {
    const project = await createProject(owner.token);
    expectData(await call('POST', feedsPath(project.namespace), owner.token, { name: 'orders' }), 201);
    const published: any[] = [];
    const send = async (feed: string, event: string, tags: Record<string, unknown>) => {
      published.push(expectData(await call('POST', eventsPath(project.namespace, feed), key, { event, tags }), 201));
    };
    await send('general', 'signup ada', { plan: 'pro', seats: 3, trial: true });
    await send('orders', 'order 1', { plan: 'free', amount: 9.5 });
    await send('general', 'signup bob', { plan: 'pro', seats: 30, trial: false });
    await send('orders', 'order 2', { plan: 'pro', amount: 12, code: '3' });
    await send('general', 'signup cy', { label: 'true' });

    const list = async (query: string) => expectData(await call('GET', projectPath(project.namespace, `/events${query}`), key), 200, query);
    const names = async (query: string) => (await list(query)).items.map((e: { event: string }) => e.event);

    const all = await list('');
    expect(all.next_cursor).to.equal(null);
    expect(all.items).to.deep.equal([...published].reverse());
    expect(await names('?feed=orders')).to.deep.equal(['order 2', 'order 1']);
    expect(await names('?feed=general')).to.deep.equal(['signup cy', 'signup bob', 'signup ada']);
    expect(await names('?feed=unknown')).to.deep.equal([]);
    expect(await names('?tag=plan:pro')).to.deep.equal(['order 2', 'signup bob', 'signup ada']);
    expect(await names('?tag=plan:pro&feed=general')).to.deep.equal(['signup bob', 'signup ada']);
    expect(await names('?tag=seats:3')).to.deep.equal(['signup ada']);
    expect(await names('?tag=amount:9.5')).to.deep.equal(['order 1']);
    expect(await names('?tag=trial:true')).to.deep.equal(['signup ada']);
    expect(await names('?tag=trial:false')).to.deep.equal(['signup bob']);
    // A value that spells a number or boolean matches the string too.
    expect(await names('?tag=code:3')).to.deep.equal(['order 2']);
    expect(await names('?tag=label:true')).to.deep.equal(['signup cy']);
    expect(await names('?tag=plan:enterprise')).to.deep.equal([]);
    expect(await names('?tag=missing:x')).to.deep.equal([]);
    expectInvalid(await call('GET', projectPath(project.namespace, '/events?tag=Plan:pro'), key), '/query/tag/0');
    expectInvalid(await call('GET', projectPath(project.namespace, '/events?tag=nocolon'), key), '/query/tag/0');
    expectInvalid(await call('GET', projectPath(project.namespace, '/events?feed=Bad_Feed'), key), '/query/feed');
  });

  it('a cursor walk over 25 events with limit 10 yields each exactly once, newest first (also with a filter)', async () => {
    const project = await createProject(owner.token);
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) {
      ids.push(
        expectData(
          await call('POST', eventsPath(project.namespace, 'general'), key, {
            event: `e${i}`,
            tags: { parity: i % 2 === 0 ? 'even' : 'odd' },
          }),
          201,
        ).id,
      );
    }
    const { items, pages } = await walk(key, projectPath(project.namespace, '/events'), 10);
    expect(pages).to.deep.equal([10, 10, 5]);
    expect(items.map((e) => e.id)).to.deep.equal([...ids].reverse());
    expect(new Set(items.map((e) => e.id)).size).to.equal(25);

    const even: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `?tag=parity:even&feed=general&limit=5${cursor ? `&cursor=${cursor}` : ''}`;
      const page = expectData(await call('GET', projectPath(project.namespace, `/events${query}`), key));
      even.push(...page.items.map((e: { id: string }) => e.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(even).to.deep.equal(ids.filter((_, i) => i % 2 === 0).reverse());
    expectInvalid(await call('GET', projectPath(project.namespace, '/events?cursor=bm90LWEtY3Vyc29y'), key), '/query/cursor');
  });

  describe('every limit of an event: 400 invalid_request, nothing stored', () => {
    const cases: [string, Record<string, unknown>, string | undefined][] = [
      ['an event of 0 characters', { event: '' }, '/body/event'],
      ['an event of 201 characters', { event: 'e'.repeat(201) }, '/body/event'],
      ['no event', { description: 'd' }, '/body/event'],
      ['a description of 4001 characters', { event: 'e', description: 'd'.repeat(4001) }, '/body/description'],
      ['21 tags', { event: 'e', tags: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i])) }, '/body/tags'],
      ['a tag key with upper case', { event: 'e', tags: { Plan: 'pro' } }, undefined],
      ['a tag key of 33 characters', { event: 'e', tags: { ['k'.repeat(33)]: 1 } }, undefined],
      ['a tag key with a space', { event: 'e', tags: { 'a b': 1 } }, undefined],
      ['an empty tag key', { event: 'e', tags: { '': 1 } }, undefined],
      ['a tag value string of 201 characters', { event: 'e', tags: { note: 'v'.repeat(201) } }, undefined],
      ['an object as a tag value', { event: 'e', tags: { nested: { a: 1 } } }, undefined],
      ['an array as a tag value', { event: 'e', tags: { list: [1, 2] } }, undefined],
      ['null as a tag value', { event: 'e', tags: { none: null } }, undefined],
      ['an emoji of 33 characters', { event: 'e', emoji: 'x'.repeat(33) }, '/body/emoji'],
      ['an unknown field', { event: 'e', severity: 'high' }, undefined],
      ['a timestamp that is not a date-time', { event: 'e', timestamp: 'yesterday' }, '/body/timestamp'],
      ['an event that is a number', { event: 42 }, '/body/event'],
    ];
    let project: any;
    before(async () => {
      project = await createProject(owner.token);
    });

    for (const [what, body, path] of cases) {
      it(`refuses ${what}`, async () => {
        const answer = await call('POST', eventsPath(project.namespace, 'general'), key, body);
        if (path) expectInvalid(answer, path, what);
        else expectError(answer, 400, 'invalid_request', what);
        expect(await eventCount(project.id)).to.equal(0);
      });
    }

    it(
      'accepts each limit exactly: 200 characters, 4000, 20 tags, a 32-character key, a 200-character value, a 32-character ' + 'emoji',
      async () => {
        const tags: Record<string, unknown> = Object.fromEntries(Array.from({ length: 18 }, (_, i) => [`k${i}`, i % 3 === 0 ? true : i]));
        tags['k'.repeat(32)] = 'v'.repeat(200);
        tags['a-1'] = -1.25;
        const body = { event: 'e'.repeat(200), description: 'd'.repeat(4000), emoji: 'x'.repeat(32), tags };
        const event = expectData(await call('POST', eventsPath(project.namespace, 'general'), key, body), 201);
        expect(event).to.deep.include(body);
        expect(await eventCount(project.id)).to.equal(1);
        await sql('delete from events where project_id = ?', [project.id]);
      },
    );
  });

  it('answers 404 for an unknown feed and stores nothing', async () => {
    const project = await createProject(owner.token);
    expectError(await call('POST', eventsPath(project.namespace, 'nope'), key, { event: 'x' }), 404, 'not_found');
    expect(await eventCount(project.id)).to.equal(0);
  });

  it('answers 404 to non-members (session or API token) on publish and list, and stores nothing', async () => {
    const project = await createProject(owner.token);
    expectData(await call('POST', eventsPath(project.namespace, 'general'), key, { event: 'private' }), 201);
    const strangerKey = await apiToken(stranger.token);
    for (const token of [stranger.token, strangerKey]) {
      expectError(await call('POST', eventsPath(project.namespace, 'general'), token, { event: 'intruder' }), 404, 'not_found', 'publish');
      expectError(await call('GET', projectPath(project.namespace, '/events'), token), 404, 'not_found', 'list');
      expectError(await call('GET', projectPath(project.namespace, '/events?feed=general'), token), 404, 'not_found', 'list by feed');
    }
    expectError(await call('POST', eventsPath(project.namespace, 'general'), undefined, { event: 'anonymous' }), 401, 'unauthenticated');
    expect(await eventCount(project.id)).to.equal(1);
  });
});
