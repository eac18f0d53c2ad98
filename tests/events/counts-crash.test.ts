/**
 * Counts never differ from the events stored: with publishers racing on two instances and one of
 * them killed (SIGKILL) while groups are committing, every feed's counts per minute, quarter hour,
 * hour and UTC day, and every end user's number of events, equal what the events table holds afterwards.
 * PostgreSQL only: a second process shares the run's database (an embedded database has one owner).
 */
import { expect } from 'chai';
import { count, database, sql } from '../support/harness.js';
import { apiToken, signUp } from '../support/accounts.js';
import { callAt, call, expectData } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { startServiceProcess } from '../support/service-process.js';

describe('event counts after a crash', function () {
  this.timeout(120_000);
  before(function () {
    if (database().kind !== 'postgresql') this.skip();
  });

  it('match the events stored, per feed, span and bucket, and per end user', async () => {
    const owner = await signUp();
    const token = await apiToken(owner.token);
    const project = await createProject(owner.token);
    expectData(await call('POST', projectPath(project.namespace, '/feeds'), owner.token, { name: 'second' }), 201);
    const clientUrl = database().orm.config.get('clientUrl');
    const doomed = await startServiceProcess({ ...process.env, DATABASE_URL: clientUrl, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' });

    let n = 0;
    const body = () => {
      n++;
      return {
        feed: n % 2 ? 'general' : 'second',
        event: `e${n}`,
        user_id: `u${n % 13}`,
        timestamp: new Date(Date.parse('2026-04-01T00:00:00Z') + (n % 97) * 37_000).toISOString(),
      };
    };
    const statuses: number[] = [];
    let stop = false;
    const publisher = async (origin: string | undefined) => {
      while (!stop) {
        const batch = Array.from({ length: 1 + (n % 20) }, body);
        const path = projectPath(project.namespace, '/events');
        const answer = await (
          origin ? callAt(origin, 'POST', path, token, { events: batch }) : call('POST', path, token, { events: batch })
        ).catch(() => ({ status: 0 }));
        statuses.push(answer.status);
        if (origin && answer.status === 0) return;
      }
    };
    const publishers = [
      ...Array.from({ length: 6 }, () => publisher(doomed.url)),
      ...Array.from({ length: 3 }, () => publisher(undefined)),
    ];
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    doomed.child.kill('SIGKILL');
    await doomed.exited;
    await new Promise((resolve) => setTimeout(resolve, 500));
    stop = true;
    await Promise.all(publishers);

    expect(statuses.filter((s) => s === 201).length, 'publishes answered').to.be.greaterThan(10);
    expect(statuses.filter((s) => s !== 201 && s !== 0)).to.deep.equal([]);
    const mismatches = await sql(
      `with stored as (
         select e.feed_id, s.span, to_timestamp(floor(extract(epoch from e.timestamp) / s.span) * s.span) as start, count(*) as n
         from events e cross join (values (60), (900), (3600), (86400)) as s(span) where e.project_id = ? group by 1, 2, 3
       ), counted as (select feed_id, span, start, count as n from event_counts where project_id = ?)
       select * from stored full join counted using (feed_id, span, start) where stored.n is distinct from counted.n`,
      [project.id, project.id],
    );
    expect(mismatches).to.deep.equal([]);
    const users = await sql(
      `with stored as (select user_id, count(*) as n, min(timestamp) as first, max(timestamp) as last from events where project_id = ? group by 1),
       kept as (select user_id, event_count as n, first_seen as first, last_seen as last from end_users where project_id = ?)
       select * from stored full join kept using (user_id)
       where stored.n is distinct from kept.n or stored.first is distinct from kept.first or stored.last is distinct from kept.last`,
      [project.id, project.id],
    );
    expect(users).to.deep.equal([]);
    expect(await count('select count(*)::int as n from events where project_id = ?', [project.id])).to.be.greaterThan(0);
  });
});
