/**
 * Events over time (`GET …/events/counts`): buckets of a minute, an hour or a day in a time zone,
 * empty ones as 0, per feed or together; the counts equal the events stored after concurrent
 * publishing, single and batched; retention's deletes leave them; a deleted feed takes its own;
 * every bad range, zone or size is a 400 in the envelope.
 */
import { expect } from 'chai';
import { count, sql } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid } from '../support/http.js';
import { addMember, createProject, projectPath } from '../support/projects.js';

function countsPath(namespace: string, query: Record<string, string>): string {
  return projectPath(namespace, `/events/counts?${new URLSearchParams(query).toString()}`);
}

async function publish(token: string, namespace: string, feed: string, timestamp: string): Promise<void> {
  expectData(await call('POST', projectPath(namespace, `/feeds/${feed}/events`), token, { event: 'e', timestamp }), 201);
}

async function addFeed(token: string, namespace: string, name: string): Promise<void> {
  expectData(await call('POST', projectPath(namespace, '/feeds'), token, { name }), 201);
}

describe('event counts', () => {
  let owner: TestUser;
  let token: string;
  before(async () => {
    owner = await signUp();
    token = await apiToken(owner.token);
  });

  it('counts per hour in UTC by default, buckets consecutive with the empty ones as 0', async () => {
    const project = await createProject(owner.token);
    await publish(token, project.namespace, 'general', '2026-03-14T09:05:00Z');
    await publish(token, project.namespace, 'general', '2026-03-14T09:59:59.999Z');
    await publish(token, project.namespace, 'general', '2026-03-14T11:00:00Z');
    const answer = expectData(
      await call('GET', countsPath(project.namespace, { from: '2026-03-14T08:30:00Z', to: '2026-03-14T11:10:00Z' }), owner.token),
    );
    expect(answer).to.deep.equal({
      interval: 'hour',
      tz: 'UTC',
      series: [
        {
          feed: null,
          buckets: [
            { start: '2026-03-14T08:00:00.000Z', count: 0 },
            { start: '2026-03-14T09:00:00.000Z', count: 2 },
            { start: '2026-03-14T10:00:00.000Z', count: 0 },
            { start: '2026-03-14T11:00:00.000Z', count: 1 },
          ],
        },
      ],
    });
  });

  it('cuts days at midnight of the zone, 23 hours long on the day the clocks go forward', async () => {
    const project = await createProject(owner.token);
    // Berlin: 2026-03-29 02:00 local becomes 03:00 (UTC+1 → UTC+2).
    await publish(token, project.namespace, 'general', '2026-03-28T22:59:00Z'); // 23:59 on the 28th, Berlin
    await publish(token, project.namespace, 'general', '2026-03-28T23:00:00Z'); // 00:00 on the 29th
    await publish(token, project.namespace, 'general', '2026-03-29T21:59:00Z'); // 23:59 on the 29th (UTC+2)
    await publish(token, project.namespace, 'general', '2026-03-29T22:00:00Z'); // 00:00 on the 30th
    const answer = expectData(
      await call(
        'GET',
        countsPath(project.namespace, { interval: 'day', tz: 'Europe/Berlin', from: '2026-03-28T12:00:00Z', to: '2026-03-30T12:00:00Z' }),
        owner.token,
      ),
    );
    expect(answer.tz).to.equal('Europe/Berlin');
    expect(answer.series[0].buckets).to.deep.equal([
      { start: '2026-03-27T23:00:00.000Z', count: 1 },
      { start: '2026-03-28T23:00:00.000Z', count: 2 },
      { start: '2026-03-29T22:00:00.000Z', count: 1 },
    ]);
  });

  it('cuts hours where the zone puts them: Kathmandu is UTC+05:45', async () => {
    const project = await createProject(owner.token);
    await publish(token, project.namespace, 'general', '2026-03-14T09:14:00Z'); // 14:59 local
    await publish(token, project.namespace, 'general', '2026-03-14T09:15:00Z'); // 15:00 local
    const answer = expectData(
      await call(
        'GET',
        countsPath(project.namespace, { tz: 'Asia/Kathmandu', from: '2026-03-14T09:00:00Z', to: '2026-03-14T09:20:00Z' }),
        owner.token,
      ),
    );
    expect(answer.series[0].buckets).to.deep.equal([
      { start: '2026-03-14T08:15:00.000Z', count: 1 },
      { start: '2026-03-14T09:15:00.000Z', count: 1 },
    ]);
  });

  it('counts per minute, per feed with group_by=feed (every feed, by name), or one feed', async () => {
    const project = await createProject(owner.token);
    await addFeed(owner.token, project.namespace, 'alpha');
    await publish(token, project.namespace, 'alpha', '2026-03-14T09:00:30Z');
    await publish(token, project.namespace, 'general', '2026-03-14T09:01:00Z');
    await publish(token, project.namespace, 'general', '2026-03-14T09:01:59Z');
    const range = { interval: 'minute', from: '2026-03-14T09:00:00Z', to: '2026-03-14T09:01:00Z' };
    const grouped = expectData(await call('GET', countsPath(project.namespace, { ...range, group_by: 'feed' }), owner.token));
    expect(grouped.series).to.deep.equal([
      {
        feed: 'alpha',
        buckets: [
          { start: '2026-03-14T09:00:00.000Z', count: 1 },
          { start: '2026-03-14T09:01:00.000Z', count: 0 },
        ],
      },
      {
        feed: 'general',
        buckets: [
          { start: '2026-03-14T09:00:00.000Z', count: 0 },
          { start: '2026-03-14T09:01:00.000Z', count: 2 },
        ],
      },
    ]);
    const one = expectData(await call('GET', countsPath(project.namespace, { ...range, feed: 'general' }), owner.token));
    expect(one.series).to.deep.equal([{ feed: null, buckets: grouped.series[1].buckets }]);
    const none = expectData(await call('GET', countsPath(project.namespace, { ...range, feed: 'nope' }), owner.token));
    expect(none.series[0].buckets.map((b: { count: number }) => b.count)).to.deep.equal([0, 0]);
  });

  it('keeps counts exact under concurrent single and batch publishing, on every feed', async () => {
    const project = await createProject(owner.token);
    await addFeed(owner.token, project.namespace, 'beta');
    const base = Date.parse('2026-02-01T00:00:00Z');
    const at = (i: number) => new Date(base + (i % 7) * 3_600_000 + i * 1000).toISOString();
    await Promise.all([
      ...Array.from({ length: 60 }, (_, i) => publish(token, project.namespace, i % 2 ? 'general' : 'beta', at(i))),
      ...Array.from({ length: 6 }, (_, b) =>
        call('POST', projectPath(project.namespace, '/events'), token, {
          events: Array.from({ length: 25 }, (_, i) => ({ feed: i % 3 ? 'general' : 'beta', event: 'b', timestamp: at(b * 25 + i) })),
        }).then((answer) => expectData(answer, 201)),
      ),
    ]);
    const stored = await sql<{ feed: string; hour: string; n: number }>(
      `select f.name as feed, to_json(date_trunc('hour', e.timestamp at time zone 'UTC')) #>> '{}' as hour, count(*)::int as n
       from events e join feeds f on f.id = e.feed_id where e.project_id = ? group by 1, 2`,
      [project.id],
    );
    const answer = expectData(
      await call(
        'GET',
        countsPath(project.namespace, { group_by: 'feed', from: '2026-02-01T00:00:00Z', to: '2026-02-01T12:00:00Z' }),
        owner.token,
      ),
    );
    let total = 0;
    for (const series of answer.series) {
      for (const bucket of series.buckets) {
        const row = stored.find((r) => r.feed === series.feed && Date.parse(`${r.hour}Z`) === Date.parse(bucket.start));
        expect(bucket.count, `${series.feed} ${bucket.start}`).to.equal(row?.n ?? 0);
        total += bucket.count;
      }
    }
    expect(total).to.equal(210);
    expect(await count('select count(*)::int as n from events where project_id = ?', [project.id])).to.equal(210);
    const rollup = await count('select coalesce(sum(count), 0)::int as n from event_counts where project_id = ? and span = 60', [
      project.id,
    ]);
    expect(rollup).to.equal(210);
  });

  it("keeps counts when the events are deleted by retention, and drops a deleted feed's counts", async () => {
    const project = await createProject(owner.token);
    await addFeed(owner.token, project.namespace, 'gone');
    await publish(token, project.namespace, 'general', '2026-01-10T10:00:00Z');
    await publish(token, project.namespace, 'gone', '2026-01-10T10:00:00Z');
    // As retention does: the events go, their counts stay.
    await sql('delete from events where project_id = ? and feed_id = (select id from feeds where project_id = ? and name = ?)', [
      project.id,
      project.id,
      'general',
    ]);
    const range = { interval: 'day', from: '2026-01-10T00:00:00Z', to: '2026-01-10T00:00:00Z' };
    expect(expectData(await call('GET', countsPath(project.namespace, range), owner.token)).series[0].buckets).to.deep.equal([
      { start: '2026-01-10T00:00:00.000Z', count: 2 },
    ]);
    expect(await call('DELETE', projectPath(project.namespace, '/feeds/gone'), owner.token)).to.have.property('status', 204);
    expect(expectData(await call('GET', countsPath(project.namespace, range), owner.token)).series[0].buckets).to.deep.equal([
      { start: '2026-01-10T00:00:00.000Z', count: 1 },
    ]);
  });

  it('defaults to the last 24 hours of hours, or 30 days of days, up to now', async () => {
    const project = await createProject(owner.token);
    const hours = expectData(await call('GET', countsPath(project.namespace, {}), owner.token));
    expect(hours.series[0].buckets).to.have.length(25);
    const days = expectData(await call('GET', countsPath(project.namespace, { interval: 'day' }), owner.token));
    expect(days.series[0].buckets).to.have.length(31);
    const minutes = expectData(await call('GET', countsPath(project.namespace, { interval: 'minute' }), owner.token));
    expect(minutes.series[0].buckets).to.have.length(1441);
  });

  it('refuses what it cannot answer with 400, and hides the project from non-members', async () => {
    const project = await createProject(owner.token);
    const stranger = await signUp();
    const mate = await signUp();
    await addMember(owner.token, project.namespace, mate);
    const ask = (query: Record<string, string>, who = owner.token) => call('GET', countsPath(project.namespace, query), who);
    expectInvalid(await ask({ interval: 'minute', from: '2026-01-01T00:00:00Z', to: '2026-01-02T01:00:00Z' }), '/query/from');
    expectInvalid(await ask({ interval: 'day', from: '2020-01-01T00:00:00Z', to: '2026-01-01T00:00:00Z' }), '/query/from');
    expectInvalid(await ask({ from: '2026-01-02T00:00:00Z', to: '2026-01-01T00:00:00Z' }), '/query/from');
    expectInvalid(await ask({ tz: 'Mars/Olympus_Mons' }), '/query/tz');
    expectInvalid(await ask({ tz: 'EST5EDT; drop table events' }), '/query/tz');
    expectInvalid(await ask({ interval: 'week' }), '/query/interval');
    expectInvalid(await ask({ group_by: 'tag' }), '/query/group_by');
    expectInvalid(await ask({ from: 'yesterday' }), '/query/from');
    // 1,500 buckets are fine, 1,501 are not.
    expect((await ask({ interval: 'minute', from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:59:00Z' })).status).to.equal(200);
    expectInvalid(await ask({ interval: 'minute', from: '2026-01-01T00:00:00Z', to: '2026-01-02T01:00:00Z' }), '/query/from');
    expect((await ask({}, mate.token)).status).to.equal(200);
    expectError(await ask({}, stranger.token), 404, 'not_found');
  });
});
