/**
 * LogSnag compatibility (spec/logsnag.tsp): LogSnag's routes and bodies, mapped onto projects,
 * feeds, events, insights and end users under the native routes' rules. Over raw HTTP (exact
 * statuses, bodies, and the rows left in the database), and with LogSnag's own Node.js client
 * (`@logsnag/node`), pointed at the test server by the recipe docs/moving-from-logsnag.md gives,
 * read from that page and run as written.
 */
import { readFileSync } from 'node:fs';
import vm from 'node:vm';
import { HTTPResponseError, LogSnag } from '@logsnag/node';
import { expect } from 'chai';
import { baseUrl, count, sql, startExtraServer, startRateLimitedServer, type TestServer } from '../support/harness.js';
import { apiToken, signUp, signUpOn, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError, ISO_UTC, tally, UUID7, type Answer } from '../support/http.js';
import {
  activityRows,
  addMember,
  createInsight,
  createProject,
  invite,
  namespaceName,
  projectPath,
  rowsOfProject,
} from '../support/projects.js';
import { RawStream } from '../support/sse.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

/** The messages LogSnag's `validation.body` must carry for a 400's details: where (without `/body/`), then what. */
function validationOf(details: { path: string; message: string }[]): { body: { message: string }[] } {
  return { body: details.map((d) => ({ message: `${d.path.replace(/^\/body(?:\/|$)/, '') || 'body'} ${d.message}` })) };
}

/** A 400 `invalid_request` in the envelope, with LogSnag's `validation.body` beside it, one message per detail. */
function expectLogSnagInvalid(answer: Answer, path: string, what = ''): void {
  const why = `${what} ${answer.status} ${answer.text}`;
  expect(answer.status, why).to.equal(400);
  expect(Object.keys(answer.json ?? {}).sort(), why).to.deep.equal(['error', 'success', 'validation']);
  expect(answer.json.success, why).to.equal(false);
  expect(Object.keys(answer.json.error).sort(), why).to.deep.equal(['code', 'details', 'message']);
  expect(answer.json.error.code, why).to.equal('invalid_request');
  const details = answer.json.error.details as { path: string; message: string }[];
  expect(details, why).to.be.an('array').that.is.not.empty;
  expect(
    details.map((d) => d.path),
    why,
  ).to.include(path);
  expect(answer.json.validation, why).to.deep.equal(validationOf(details));
}

/**
 * The project's rows in every table that hangs off it, and the tables LogSnag's routes write to, all
 * of them. The events' rollups (`event_counts`) are left out where events are added: how many rows
 * an event adds there depends on the buckets the clock is in (tests/events/counts.test.ts).
 */
async function snapshot(projectId: string, withRollups = true): Promise<Record<string, number>> {
  const { event_counts: rollups, ...rows } = await rowsOfProject(projectId);
  return {
    ...rows,
    ...(withRollups ? { event_counts: rollups ?? 0 } : {}),
    all_feeds: await count('select count(*)::int from feeds'),
    all_events: await count('select count(*)::int from events'),
    all_insights: await count('select count(*)::int from insights'),
  };
}

const feedsOf = (projectId: string) => sql<{ name: string }>('select name from feeds where project_id = ? order by name', [projectId]);
const eventsIn = (projectId: string, feed: string) =>
  count('select count(*)::int from events e join feeds f on f.id = e.feed_id where f.project_id = ? and f.name = ?', [projectId, feed]);

/** The recipe of docs/moving-from-logsnag.md, as written there, with the test server's address for the deployment's. */
function logSnagRecipe(): string {
  const page = readFileSync('docs/moving-from-logsnag.md', 'utf8');
  const blocks = [...page.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const recipe = blocks.find((block) => block.includes('globalThis.fetch ='));
  if (!recipe) throw new Error('docs/moving-from-logsnag.md shows no recipe that sets globalThis.fetch');
  expect(recipe).to.include("'https://signalboard.example.com'");
  return recipe.replace("'https://signalboard.example.com'", JSON.stringify(baseUrl()));
}

describe('LogSnag compatibility', () => {
  let owner: TestUser;
  let token: string;
  let project: any;
  let outsider: TestUser;

  before(async () => {
    [owner, outsider] = await Promise.all([signUp(), signUp()]);
    token = await apiToken(owner.token, 'from LogSnag');
    project = await createProject(owner.token, { name: 'Moved from LogSnag' });
  });

  describe('POST /v1/log', () => {
    it('publishes the event with every LogSnag field mapped, creating the channel as a feed on first use, and answers 200 with the Event', async () => {
      const body = {
        project: project.namespace,
        channel: 'signups',
        event: 'New signup',
        description: 'grace@example.org joined',
        icon: '🎉',
        tags: { plan: 'pro', seats: 5, trial: false },
        user_id: 'user-4711',
        notify: true,
        timestamp: 1773480411,
        parser: 'markdown',
      };
      const before = await activityRows(project.id);
      const event = expectData(await call('POST', '/v1/log', token, body), 200);
      expect(event).to.deep.equal({
        id: event.id,
        feed: 'signups',
        event: 'New signup',
        description: 'grace@example.org joined',
        emoji: '🎉',
        tags: { plan: 'pro', seats: 5, trial: false },
        user_id: 'user-4711',
        notify: true,
        timestamp: '2026-03-14T09:26:51.000Z',
        created_at: event.created_at,
      });
      expect(event.id).to.match(UUID7);
      expect(event.created_at).to.match(ISO_UTC);
      const [row] = await sql<Record<string, unknown>>(
        `select f.name as feed, e.event, e.description, e.emoji, e.tags, e.user_id, e.notify, e.timestamp
           from events e join feeds f on f.id = e.feed_id where e.id = ?`,
        [event.id],
      );
      expect({ ...row, timestamp: new Date(row!.timestamp as string).toISOString() }).to.deep.equal({
        feed: 'signups',
        event: 'New signup',
        description: 'grace@example.org joined',
        emoji: '🎉',
        tags: { plan: 'pro', seats: 5, trial: false },
        user_id: 'user-4711',
        notify: true,
        timestamp: '2026-03-14T09:26:51.000Z',
      });
      expect((await feedsOf(project.id)).map((f) => f.name)).to.deep.equal(['general', 'signups']);
      const added = (await activityRows(project.id)).slice(0, -before.length || undefined);
      expect(added.map((a) => [a.type, a.actor_id, a.data])).to.deep.equal([['feed.created', owner.id, { feed: 'signups' }]]);
    });

    it('publishes to a feed that exists without creating anything else, and the native list shows the event', async () => {
      const before = await snapshot(project.id, false);
      const event = expectData(
        await call('POST', '/v1/log', token, { project: project.namespace, channel: 'general', event: 'Deployed' }),
        200,
      );
      expect(event).to.deep.include({ feed: 'general', description: null, emoji: null, tags: {}, user_id: null, notify: false });
      expect(Date.parse(event.timestamp)).to.equal(Date.parse(event.created_at));
      const after = await snapshot(project.id, false);
      expect(after).to.deep.equal({ ...before, events: before.events! + 1, all_events: before.all_events! + 1 });
      const listed = expectData(await call('GET', projectPath(project.namespace, '/events?feed=general&limit=1'), owner.token));
      expect(listed.items).to.deep.equal([event]);
    });

    it('takes fractions of a second in timestamp, and the first and last instants of years 0001 and 9999', async () => {
      for (const [seconds, iso] of [
        [1773480411.25, '2026-03-14T09:26:51.250Z'],
        [-62135596800, '0001-01-01T00:00:00.000Z'],
        [253402300799, '9999-12-31T23:59:59.000Z'],
      ] as const) {
        const event = expectData(
          await call('POST', '/v1/log', token, { project: project.namespace, channel: 'general', event: 'Timed', timestamp: seconds }),
          200,
        );
        expect(event.timestamp, String(seconds)).to.equal(iso);
      }
      for (const seconds of [-62135596801, 253402300800]) {
        const answer = await call('POST', '/v1/log', token, {
          project: project.namespace,
          channel: 'general',
          event: 'x',
          timestamp: seconds,
        });
        expectLogSnagInvalid(answer, '/body/timestamp', String(seconds));
      }
    });

    it('creates a new channel once under concurrency: 20 first logs at once make one feed, one feed.created and 20 events', async function () {
      this.timeout(60_000);
      const before = await snapshot(project.id, false);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          call('POST', '/v1/log', token, { project: project.namespace, channel: 'race', event: `Race ${i}` }),
        ),
      );
      expect(tally(answers.map((a) => a.status))).to.deep.equal({ 200: 20 });
      expect(new Set(answers.map((a) => a.json.data.id)).size).to.equal(20);
      expect((await feedsOf(project.id)).map((f) => f.name)).to.include('race');
      expect(await eventsIn(project.id, 'race')).to.equal(20);
      const after = await snapshot(project.id, false);
      expect(after).to.deep.equal({
        ...before,
        feeds: before.feeds! + 1,
        all_feeds: before.all_feeds! + 1,
        events: before.events! + 20,
        all_events: before.all_events! + 20,
        activity: before.activity! + 1,
      });
      const created = (await activityRows(project.id)).filter((a) => a.type === 'feed.created' && a.data.feed === 'race');
      expect(created).to.have.length(1);
    });

    it('is delivered to live streams of the project like a native publication', async () => {
      const stream = await RawStream.open(`${baseUrl()}${projectPath(project.namespace, '/events/stream')}`, { token: owner.token });
      try {
        expect(stream.response.status).to.equal(200);
        const event = expectData(
          await call('POST', '/v1/log', token, { project: project.namespace, channel: 'live', event: 'Streamed' }),
          200,
        );
        const [message] = await stream.waitForEvents(1);
        expect(message!.id).to.equal(event.id);
        expect(JSON.parse(message!.data)).to.deep.equal(event);
      } finally {
        stream.close();
      }
    });

    it('answers a project that does not exist exactly as one the caller is not a member of: 404, nothing stored', async () => {
      const before = await snapshot(project.id);
      const body = (namespace: string) => ({ project: namespace, channel: 'general', event: 'Nope' });
      const notMember = await call('POST', '/v1/log', outsider.token, body(project.namespace));
      const nowhere = await call('POST', '/v1/log', token, body(namespaceName('nowhere')));
      expectError(notMember, 404, 'not_found');
      expectError(nowhere, 404, 'not_found');
      expect(nowhere.json).to.deep.equal(notMember.json);
      expect(await snapshot(project.id)).to.deep.equal(before);
    });

    it('needs a credential: 401 with the Bearer challenge and no validation', async () => {
      expectError(
        await call('POST', '/v1/log', undefined, { project: project.namespace, channel: 'general', event: 'x' }),
        401,
        'unauthenticated',
      );
    });

    it('applies the native rules the contract cannot state: 21 tags are 400 with validation, nothing stored', async () => {
      const before = await snapshot(project.id);
      const tags = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`t${i}`, i]));
      const answer = await call('POST', '/v1/log', token, { project: project.namespace, channel: 'brand-new', event: 'x', tags });
      expectLogSnagInvalid(answer, '/body/tags');
      expect(answer.json.validation).to.deep.equal({ body: [{ message: 'tags must have at most 20 tags' }] });
      expect(await snapshot(project.id)).to.deep.equal(before);
    });

    it('honours Idempotency-Key: a repeat answers the first answer, refusals with their validation too, and publishes once', async () => {
      const key = `logsnag-${Date.now()}`;
      const body = { project: project.namespace, channel: 'general', event: 'Once' };
      const first = await call('POST', '/v1/log', token, body, { 'Idempotency-Key': key });
      const before = await snapshot(project.id);
      const again = await call('POST', '/v1/log', token, body, { 'Idempotency-Key': key });
      expect(again.status).to.equal(200);
      expect(again.text).to.equal(first.text);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(await snapshot(project.id)).to.deep.equal(before);

      const refusedKey = `${key}-refused`;
      const tags = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`t${i}`, i]));
      const refused = await call('POST', '/v1/log', token, { ...body, tags }, { 'Idempotency-Key': refusedKey });
      expectLogSnagInvalid(refused, '/body/tags');
      const replayed = await call('POST', '/v1/log', token, { ...body, tags }, { 'Idempotency-Key': refusedKey });
      expect(replayed.headers.get('idempotent-replayed')).to.equal('true');
      expect(replayed.text).to.equal(refused.text);
    });
  });

  describe('refused bodies: 400 with the envelope and validation.body, and nothing changed', () => {
    const log = () => ({ project: project.namespace, channel: 'typed', event: 'Typed' });
    const insight = () => ({ project: project.namespace, title: 'Typed', value: 1 });
    const increment = () => ({ project: project.namespace, title: 'Typed', value: { $inc: 1 } });
    const identify = () => ({ project: project.namespace, user_id: 'typed-user', properties: { plan: 'pro' } });
    const CASES: { route: string; valid: () => Record<string, unknown>; field: string; wrong: unknown[]; at?: string }[] = [
      { route: 'POST /v1/log', valid: log, field: 'project', wrong: [123, null, true, [], {}, 'Not A Namespace'] },
      { route: 'POST /v1/log', valid: log, field: 'channel', wrong: [5, null, false, ['a'], {}, 'Upper Case', ''] },
      { route: 'POST /v1/log', valid: log, field: 'event', wrong: [false, 1, null, {}, '', 'x'.repeat(201)] },
      { route: 'POST /v1/log', valid: log, field: 'description', wrong: [7, true, null, [], 'x'.repeat(4001)] },
      { route: 'POST /v1/log', valid: log, field: 'icon', wrong: [9, false, null, {}, 'x'.repeat(33)] },
      {
        route: 'POST /v1/log',
        valid: log,
        field: 'tags',
        wrong: ['plan:pro', 1, null, [], { plan: {} }, { plan: null }],
        at: '/body/tags',
      },
      { route: 'POST /v1/log', valid: log, field: 'timestamp', wrong: ['2026-03-14T09:26:51Z', null, true, {}, 1e300] },
      { route: 'POST /v1/log', valid: log, field: 'user_id', wrong: [42, true, null, {}, '', 'u'.repeat(161)] },
      { route: 'POST /v1/log', valid: log, field: 'notify', wrong: ['yes', 1, null, {}] },
      { route: 'POST /v1/log', valid: log, field: 'parser', wrong: ['html', 1, null] },
      { route: 'POST /v1/insight', valid: insight, field: 'project', wrong: [[], 7, null] },
      { route: 'POST /v1/insight', valid: insight, field: 'title', wrong: [1, null, '', 't'.repeat(101)] },
      { route: 'POST /v1/insight', valid: insight, field: 'value', wrong: [{}, [], null, 'v'.repeat(257)] },
      { route: 'POST /v1/insight', valid: insight, field: 'icon', wrong: [true, 3, null] },
      { route: 'PATCH /v1/insight', valid: increment, field: 'project', wrong: [1, null] },
      { route: 'PATCH /v1/insight', valid: increment, field: 'title', wrong: [null, 2, ''] },
      {
        route: 'PATCH /v1/insight',
        valid: increment,
        field: 'value',
        wrong: [5, '5', null, {}, { $inc: '5' }, { $inc: null }, { $inc: 1, extra: 1 }, { $inc: 1e13 }],
        at: '/body/value',
      },
      { route: 'PATCH /v1/insight', valid: increment, field: 'icon', wrong: [3, false] },
      { route: 'POST /v1/identify', valid: identify, field: 'project', wrong: [null, 5] },
      { route: 'POST /v1/identify', valid: identify, field: 'user_id', wrong: [7, null, '', 'u'.repeat(161)] },
      {
        route: 'POST /v1/identify',
        valid: identify,
        field: 'properties',
        wrong: ['x', null, [], { plan: {} }, { Plan: 'pro' }, Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i]))],
        at: '/body/properties',
      },
    ];

    for (const { route, valid, field, wrong, at } of CASES) {
      it(`${route}: ${field} of the wrong type or out of bounds (${wrong.length} values)`, async () => {
        const [method, path] = route.split(' ') as [string, string];
        const before = await snapshot(project.id);
        for (const value of wrong) {
          const answer = await call(method, path, token, { ...valid(), [field]: value });
          const why = `${field}: ${JSON.stringify(value).slice(0, 40)}`;
          if (at) {
            expect(answer.status, why).to.equal(400);
            const paths = (answer.json.error.details as { path: string }[]).map((d) => d.path);
            expect(
              paths.every((p) => p.startsWith(at)),
              `${why}: ${paths.join(', ')}`,
            ).to.equal(true);
            expectLogSnagInvalid(answer, paths[0]!, why);
          } else {
            expectLogSnagInvalid(answer, `/body/${field}`, why);
          }
          for (const message of answer.json.validation.body as { message: string }[]) {
            expect(message.message.startsWith(field), `${why}: ${message.message}`).to.equal(true);
          }
        }
        expect(await snapshot(project.id)).to.deep.equal(before);
      });
    }

    for (const route of ['POST /v1/log', 'POST /v1/insight', 'PATCH /v1/insight', 'POST /v1/identify']) {
      const [method, path] = route.split(' ') as [string, string];
      it(`${route}: a missing field, an unknown field, a body that is not an object, and malformed JSON`, async () => {
        const before = await snapshot(project.id);
        const required = route.includes('identify') ? 'user_id' : 'title';
        const valid =
          route === 'POST /v1/log' ? log() : route.includes('identify') ? identify() : route.startsWith('PATCH') ? increment() : insight();
        const missing = Object.fromEntries(
          Object.entries(valid).filter(([key]) => key !== (route === 'POST /v1/log' ? 'channel' : required)),
        );
        const answer = await call(method, path, token, missing);
        expectLogSnagInvalid(answer, route === 'POST /v1/log' ? '/body/channel' : `/body/${required}`);
        expectLogSnagInvalid(await call(method, path, token, { ...valid, extra: 1 }), '/body/extra');
        expectLogSnagInvalid(await call(method, path, token, [valid]), '/body');
        const broken = await fetch(`${baseUrl()}${path}`, {
          method,
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
          body: '{"project":',
        });
        const brokenBody = await broken.json();
        expect(broken.status).to.equal(400);
        expect(brokenBody.validation).to.deep.equal(validationOf(brokenBody.error.details));
        expect(await snapshot(project.id)).to.deep.equal(before);
      });
    }
  });

  describe('POST and PATCH /v1/insight', () => {
    const insightRows = (projectId: string, title: string) =>
      sql<{ id: string; value: unknown; emoji: string | null }>(
        'select id, value, emoji from insights where project_id = ? and title = ? order by id',
        [projectId, title],
      );

    it('POST creates the insight on first use (insight.created), then sets it (insight.updated); icon is the emoji, kept when left out', async () => {
      const before = (await activityRows(project.id)).length;
      const created = expectData(
        await call('POST', '/v1/insight', token, { project: project.namespace, title: 'Users', value: 10, icon: '👥' }),
      );
      expect(created).to.deep.equal({
        id: created.id,
        title: 'Users',
        value: 10,
        emoji: '👥',
        created_at: created.created_at,
        updated_at: created.updated_at,
      });
      const set = expectData(await call('POST', '/v1/insight', token, { project: project.namespace, title: 'Users', value: 'many' }));
      expect(set).to.deep.include({ id: created.id, value: 'many', emoji: '👥' });
      const iconed = expectData(
        await call('POST', '/v1/insight', token, { project: project.namespace, title: 'Users', value: true, icon: '🧑' }),
      );
      expect(iconed).to.deep.include({ id: created.id, value: true, emoji: '🧑' });
      expect(await insightRows(project.id, 'Users')).to.deep.equal([{ id: created.id, value: true, emoji: '🧑' }]);
      const added = (await activityRows(project.id)).slice(0, (await activityRows(project.id)).length - before).reverse();
      expect(added.map((a) => [a.type, a.actor_id, a.data])).to.deep.equal([
        ['insight.created', owner.id, { insight_id: created.id, title: 'Users' }],
        ['insight.updated', owner.id, { insight_id: created.id, fields: ['value'] }],
        ['insight.updated', owner.id, { insight_id: created.id, fields: ['value', 'emoji'] }],
      ]);
    });

    it('uses the oldest insight of a title that native insights share, and leaves the others alone', async () => {
      const oldest = await createInsight(owner.token, project.namespace, { title: 'Twice', value: 1 });
      const newer = await createInsight(owner.token, project.namespace, { title: 'Twice', value: 2 });
      expect(expectData(await call('POST', '/v1/insight', token, { project: project.namespace, title: 'Twice', value: 100 })).id).to.equal(
        oldest.id,
      );
      expect(
        expectData(await call('PATCH', '/v1/insight', token, { project: project.namespace, title: 'Twice', value: { $inc: 5 } })).id,
      ).to.equal(oldest.id);
      expect(await insightRows(project.id, 'Twice')).to.deep.equal([
        { id: oldest.id, value: 105, emoji: null },
        { id: newer.id, value: 2, emoji: null },
      ]);
    });

    it('creates one insight when 10 first uses of a title race, whatever their values', async function () {
      this.timeout(60_000);
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => call('POST', '/v1/insight', token, { project: project.namespace, title: 'Raced', value: i })),
      );
      expect(tally(answers.map((a) => a.status))).to.deep.equal({ 200: 10 });
      const rows = await insightRows(project.id, 'Raced');
      expect(rows).to.have.length(1);
      expect(new Set(answers.map((a) => a.json.data.id))).to.deep.equal(new Set([rows[0]!.id]));
      const records = (await activityRows(project.id)).filter((a) => a.data.insight_id === rows[0]!.id);
      expect(tally(records.map((a) => (a.type === 'insight.created' ? 1 : 2)))).to.deep.equal({ 1: 1, 2: 9 });
    });

    it('PATCH increments from 0 when the insight does not exist yet, by negative amounts too; icon changes the emoji only when it differs', async () => {
      const patch = (body: Record<string, unknown>) =>
        call('PATCH', '/v1/insight', token, { project: project.namespace, title: 'Balance', ...body });
      const first = expectData(await patch({ value: { $inc: -2.5 }, icon: '💰' }));
      expect(first).to.deep.include({ title: 'Balance', value: -2.5, emoji: '💰' });
      expect(expectData(await patch({ value: { $inc: 10 } }))).to.deep.include({ id: first.id, value: 7.5, emoji: '💰' });
      expect(expectData(await patch({ value: { $inc: 1 }, icon: '💰' }))).to.deep.include({ id: first.id, value: 8.5, emoji: '💰' });
      expect(expectData(await patch({ value: { $inc: -0.5 }, icon: '🪙' }))).to.deep.include({ id: first.id, value: 8, emoji: '🪙' });
      const records = (await activityRows(project.id)).filter((a) => a.data.insight_id === first.id).reverse();
      expect(records.map((a) => [a.type, a.actor_id, a.data])).to.deep.equal([
        ['insight.created', owner.id, { insight_id: first.id, title: 'Balance' }],
        ['insight.updated', owner.id, { insight_id: first.id, fields: ['increment'] }],
        ['insight.updated', owner.id, { insight_id: first.id, fields: ['increment'] }],
        ['insight.updated', owner.id, { insight_id: first.id, fields: ['increment'] }],
        ['insight.updated', owner.id, { insight_id: first.id, fields: ['emoji', 'increment'] }],
      ]);
    });

    it('loses no increment when 20 race on a new title: one insight, at 20', async function () {
      this.timeout(60_000);
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          call('PATCH', '/v1/insight', token, { project: project.namespace, title: 'Clicks', value: { $inc: 1 } }),
        ),
      );
      expect(tally(answers.map((a) => a.status))).to.deep.equal({ 200: 20 });
      const rows = await insightRows(project.id, 'Clicks');
      expect(rows.map((r) => r.value)).to.deep.equal([20]);
    });

    it('PATCH on a value that is not a number is 400 at value/$inc, and changes nothing', async () => {
      await call('POST', '/v1/insight', token, { project: project.namespace, title: 'Status', value: 'green' });
      const before = await snapshot(project.id);
      const answer = await call('PATCH', '/v1/insight', token, { project: project.namespace, title: 'Status', value: { $inc: 1 } });
      expectLogSnagInvalid(answer, '/body/value/$inc');
      expect(answer.json.validation).to.deep.equal({
        body: [{ message: 'value/$inc applies only to an insight whose value is a number' }],
      });
      expect(await snapshot(project.id)).to.deep.equal(before);
      expect((await insightRows(project.id, 'Status')).map((r) => r.value)).to.deep.equal(['green']);
    });

    it('is for members: 404 for a project the caller is not a member of, and for none at all', async () => {
      for (const [method, body] of [
        ['POST', { title: 'Users', value: 1 }],
        ['PATCH', { title: 'Users', value: { $inc: 1 } }],
      ] as const) {
        expectError(await call(method, '/v1/insight', outsider.token, { project: project.namespace, ...body }), 404, 'not_found');
        expectError(await call(method, '/v1/insight', token, { project: namespaceName('none'), ...body }), 404, 'not_found');
      }
    });
  });

  describe('POST /v1/identify', () => {
    it('is PUT …/users/{user_id}: properties merged, later values replacing earlier ones', async () => {
      const first = expectData(
        await call('POST', '/v1/identify', token, {
          project: project.namespace,
          user_id: 'user-1',
          properties: { plan: 'free', seats: 1 },
        }),
      );
      expect(first).to.deep.equal({
        user_id: 'user-1',
        properties: { plan: 'free', seats: 1 },
        first_seen: null,
        last_seen: null,
        event_count: 0,
      });
      const second = expectData(
        await call('POST', '/v1/identify', token, {
          project: project.namespace,
          user_id: 'user-1',
          properties: { plan: 'pro', trial: false },
        }),
      );
      expect(second.properties).to.deep.equal({ plan: 'pro', seats: 1, trial: false });
      const native = expectData(await call('GET', projectPath(project.namespace, '/users/user-1'), owner.token));
      expect(native).to.deep.equal(second);
    });

    it('refuses a merge that would hold more than 50 properties, with validation, changing nothing', async () => {
      const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]));
      expectData(await call('POST', '/v1/identify', token, { project: project.namespace, user_id: 'user-50', properties: fifty }));
      const before = await snapshot(project.id);
      const answer = await call('POST', '/v1/identify', token, { project: project.namespace, user_id: 'user-50', properties: { more: 1 } });
      expectLogSnagInvalid(answer, '/body/properties');
      expect(await snapshot(project.id)).to.deep.equal(before);
    });

    it('is for members: 404 otherwise', async () => {
      const body = { project: project.namespace, user_id: 'user-1', properties: { a: 1 } };
      expectError(await call('POST', '/v1/identify', outsider.token, body), 404, 'not_found');
    });
  });

  describe('POST /v1/group and POST /v1/page', () => {
    for (const path of ['/v1/group', '/v1/page']) {
      it(`${path} is no route here: 404 not_found in the envelope, with or without a credential`, async () => {
        const body = { project: project.namespace, group_id: 'g', user_id: 'u', payload: { path: '/' } };
        for (const answer of [await call('POST', path, token, body), await call('POST', path, undefined, body), await call('POST', path)]) {
          expectError(answer, 404, 'not_found');
          expect(answer.json.error.message).to.equal('No route matches this path.');
        }
      });
    }
  });

  describe('caps and rate limits, as on the native routes', () => {
    let capped: TestServer;
    let user: TestUser;
    let namespace: string;
    let projectId: string;

    before(async function () {
      this.timeout(60_000);
      capped = await startExtraServer({ MAX_FEEDS_PER_PROJECT: '3', MAX_INSIGHTS_PER_PROJECT: '1', ...CLOSES_AT_ONCE });
      user = await signUpOn(capped);
      const made = await createProject(user.token, { name: 'Capped' }, capped.url);
      namespace = made.namespace;
      projectId = made.id;
    });

    after(async () => {
      await capped?.close();
    });

    const feedNames = async () =>
      (await sql<{ name: string }>('select name from feeds where project_id = ? order by name', [projectId], capped.db)).map((f) => f.name);

    it('creates channels up to MAX_FEEDS_PER_PROJECT (10 racing for the last place: one feed), then 409 limit_reached and nothing published', async function () {
      this.timeout(60_000);
      const log = (channel: string, event = 'x') =>
        callAt(capped.url, 'POST', '/v1/log', user.token, { project: namespace, channel, event });
      expectData(await log('first'));
      const raced = await Promise.all(Array.from({ length: 10 }, (_, i) => log('last', `Race ${i}`)));
      expect(tally(raced.map((a) => a.status))).to.deep.equal({ 200: 10 });
      expect(await feedNames()).to.deep.equal(['first', 'general', 'last']);
      const events = () => count('select count(*)::int from events where project_id = ?', [projectId], capped.db);
      const before = await events();
      const refused = await log('one-too-many');
      expect(refused.status).to.equal(409);
      expect(refused.json).to.deep.equal({
        success: false,
        error: {
          code: 'limit_reached',
          message: 'This project has 3 feeds: the limit is 3 (MAX_FEEDS_PER_PROJECT).',
          details: [{ path: '/limits/MAX_FEEDS_PER_PROJECT', message: 'at most 3' }],
        },
      });
      expect(await feedNames()).to.deep.equal(['first', 'general', 'last']);
      expect(await events()).to.equal(before);
      expectData(await log('last'));
      expect(await events()).to.equal(before + 1);
    });

    it('creates insights up to MAX_INSIGHTS_PER_PROJECT; past it, a new title is 409 limit_reached while the existing one is still set and incremented', async () => {
      const insight = (method: string, title: string, value: unknown) =>
        callAt(capped.url, method, '/v1/insight', user.token, { project: namespace, title, value });
      expectData(await insight('POST', 'Only', 1));
      for (const refused of [await insight('POST', 'Second', 1), await insight('PATCH', 'Second', { $inc: 1 })]) {
        expect(refused.status).to.equal(409);
        expect(refused.json.error.code).to.equal('limit_reached');
      }
      expect(expectData(await insight('PATCH', 'Only', { $inc: 2 })).value).to.equal(3);
      expect(await count('select count(*)::int from insights where project_id = ?', [projectId], capped.db)).to.equal(1);
    });

    it('shares the user’s one rate-limit count with the native routes', async function () {
      this.timeout(60_000);
      const limited = await startRateLimitedServer({ API_RATE_LIMIT: '3', ...CLOSES_AT_ONCE });
      try {
        const someone = await signUpOn(limited);
        // Sign-up is counted apart (AUTH_RATE_LIMIT, off here); the project's creation takes one of the 3.
        const made = await createProject(someone.token, { name: 'Limited' }, limited.url);
        const native = await callAt(limited.url, 'POST', projectPath(made.namespace, '/feeds/general/events'), someone.token, {
          event: 'x',
        });
        expect(native.status).to.equal(201);
        const logged = await callAt(limited.url, 'POST', '/v1/log', someone.token, {
          project: made.namespace,
          channel: 'general',
          event: 'y',
        });
        expect(logged.status).to.equal(200);
        const refused = await callAt(limited.url, 'POST', '/v1/log', someone.token, {
          project: made.namespace,
          channel: 'general',
          event: 'z',
        });
        expectError(refused, 429, 'rate_limited');
        expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
      } finally {
        await limited.close();
      }
    });
  });

  describe("LogSnag's own Node.js client (@logsnag/node), pointed here by the documented recipe", () => {
    let restore: typeof fetch;
    let member: TestUser;
    let memberToken: string;

    before(async () => {
      member = await signUp();
      await addMember(owner.token, project.namespace, member);
      memberToken = await apiToken(member.token, 'LogSnag SDK');
      restore = globalThis.fetch;
      vm.runInThisContext(`(() => {\n${logSnagRecipe()}\n})()`);
      expect(globalThis.fetch).to.not.equal(restore);
    });

    after(() => {
      globalThis.fetch = restore;
    });

    it('track: publishes with every option, the channel made on first use, a Date timestamp turned into seconds', async () => {
      const logsnag = new LogSnag({ token: memberToken, project: project.namespace });
      const at = new Date('2026-03-14T09:26:51.000Z');
      expect(
        await logsnag.track({
          channel: 'from-sdk',
          event: 'New signup',
          description: 'from the SDK',
          icon: '🎉',
          tags: { plan: 'pro', seats: 5, trial: false },
          user_id: 'sdk-user',
          notify: true,
          parser: 'markdown',
          timestamp: at,
        }),
      ).to.equal(true);
      const [row] = await sql<Record<string, unknown>>(
        `select e.event, e.description, e.emoji, e.tags, e.user_id, e.notify, e.timestamp
           from events e join feeds f on f.id = e.feed_id where f.project_id = ? and f.name = 'from-sdk'`,
        [project.id],
      );
      expect({ ...row, timestamp: new Date(row!.timestamp as string).toISOString() }).to.deep.equal({
        event: 'New signup',
        description: 'from the SDK',
        emoji: '🎉',
        tags: { plan: 'pro', seats: 5, trial: false },
        user_id: 'sdk-user',
        notify: true,
        timestamp: at.toISOString(),
      });
      const created = (await activityRows(project.id)).find((a) => a.type === 'feed.created' && a.data.feed === 'from-sdk');
      expect(created?.actor_id).to.equal(member.id);
    });

    it('insight.track and insight.increment: set, then incremented', async () => {
      const logsnag = new LogSnag({ token: memberToken, project: project.namespace });
      expect(await logsnag.insight.track({ title: 'SDK users', value: 41, icon: '👥' })).to.equal(true);
      expect(await logsnag.insight.increment({ title: 'SDK users', value: 1 })).to.equal(true);
      expect(await logsnag.insight.increment({ title: 'SDK fresh', value: -3 })).to.equal(true);
      const rows = await sql<{ title: string; value: unknown; emoji: string | null }>(
        `select title, value, emoji from insights where project_id = ? and title like 'SDK %' order by title`,
        [project.id],
      );
      expect(rows).to.deep.equal([
        { title: 'SDK fresh', value: -3, emoji: null },
        { title: 'SDK users', value: 42, emoji: '👥' },
      ]);
    });

    it('identify: the end user’s properties recorded', async () => {
      const logsnag = new LogSnag({ token: memberToken, project: project.namespace });
      expect(await logsnag.identify({ user_id: 'sdk-user', properties: { plan: 'pro', seats: 5 } })).to.equal(true);
      const user = expectData(await call('GET', projectPath(project.namespace, '/users/sdk-user'), owner.token));
      expect(user.properties).to.deep.equal({ plan: 'pro', seats: 5 });
    });

    it("a refused request throws HTTPResponseError with the service's reasons, read from validation.body", async () => {
      const logsnag = new LogSnag({ token: memberToken, project: project.namespace });
      const before = await snapshot(project.id);
      const error = await logsnag.track({ channel: 'Not A Channel', event: 'x', tags: { ['Plan' as Lowercase<string>]: 'pro' } }).then(
        () => expect.fail('the request was not refused'),
        (thrown: unknown) => thrown,
      );
      expect(error).to.be.instanceOf(HTTPResponseError);
      expect((error as Error).message).to.equal(
        '[LogSnag] Failed to publish: channel must match pattern "^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"',
      );
      const badTag = await logsnag.track({ channel: 'general', event: 'x', tags: { ['Plan' as Lowercase<string>]: 'pro' } }).then(
        () => expect.fail('the request was not refused'),
        (thrown: unknown) => thrown as Error,
      );
      expect(badTag.message).to.equal(
        '[LogSnag] Failed to publish: tags/Plan must be a key of 1–32 lower-case letters, digits and hyphens',
      );
      expect(await snapshot(project.id)).to.deep.equal(before);
    });

    it('a project the token’s user is not a member of, a token that is no token, and group: thrown, nothing stored', async () => {
      const before = await snapshot(project.id);
      const elsewhere = new LogSnag({ token: memberToken, project: namespaceName('elsewhere') });
      const stranger = new LogSnag({ token: 'api_not-a-token', project: project.namespace });
      for (const attempt of [
        () => elsewhere.track({ channel: 'general', event: 'x' }),
        () => stranger.track({ channel: 'general', event: 'x' }),
        () => stranger.insight.increment({ title: 'SDK users', value: 1 }),
        () => new LogSnag({ token: memberToken, project: project.namespace }).group({ group_id: 'g', user_id: 'u', properties: { a: 1 } }),
      ]) {
        const thrown = await attempt().then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(thrown).to.be.instanceOf(HTTPResponseError);
        expect((thrown as Error).message).to.equal('[LogSnag] Failed to publish: : Please check our docs at https://docs.logsnag.com');
      }
      expect(await snapshot(project.id)).to.deep.equal(before);
    });

    it('leaves every other request of the process alone', async () => {
      const answer = await fetch(`${baseUrl()}/v1`);
      expect(answer.status).to.equal(200);
      const other = await fetch('http://127.0.0.1:9/').then(
        () => 'answered',
        () => 'refused',
      );
      expect(other).to.equal('refused');
    });
  });

  describe('access: a member’s token acts for the member, anyone else’s sees no project', () => {
    it('a member (not the owner) publishes and sets insights; a pending invitee is refused as an outsider', async () => {
      const [member, invitee] = await Promise.all([signUp(), signUp()]);
      await addMember(owner.token, project.namespace, member);
      await invite(owner.token, project.namespace, invitee.username);
      const body = { project: project.namespace, channel: 'general', event: 'By a member' };
      expectData(await call('POST', '/v1/log', member.token, body));
      expectError(await call('POST', '/v1/log', invitee.token, body), 404, 'not_found');
    });
  });
});
