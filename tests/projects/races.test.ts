/**
 * Races: concurrent deletes of one thing have exactly one winner (one 204 and one activity record,
 * every other caller 404), and deleting a project while its insights are incremented, its events
 * published or an invite to it accepted never fails: the delete wins the first time, the writers
 * answer 200 or 404, and nothing of the project is left behind. Deadlocks happen on PostgreSQL
 * (the embedded database runs one transaction at a time), so these run there only, and are skipped
 * on the embedded database with that reason.
 */
import { expect } from 'chai';
import { count, database, sql } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectNoContent, tally, type Answer } from '../support/http.js';
import {
  activityRows,
  addMember,
  createInsight,
  createProject,
  expectNoRowsOfProject,
  invite,
  projectPath,
  rowsOfProject,
} from '../support/projects.js';

const RACERS = 20;

/** Skips the suite where transactions cannot race (the embedded database runs one at a time). */
function onPostgresqlOnly(this: Mocha.Context): void {
  if (database().kind !== 'postgresql') this.skip();
}

/** `RACERS` copies of the same request at once: exactly one 204 (no body), every other one 404 `not_found`. */
async function oneWinner(request: () => Promise<Answer>, what: string): Promise<void> {
  const answers = await Promise.all(Array.from({ length: RACERS }, request));
  const statuses = answers.map((answer) => answer.status);
  expect(
    statuses.filter((status) => status === 204),
    `${what}: ${statuses.join(' ')}`,
  ).to.have.length(1);
  for (const answer of answers) {
    if (answer.status === 204) expectNoContent(answer, what);
    else expectError(answer, 404, 'not_found', what);
  }
}

async function activityOf(projectId: string, type: string): Promise<number> {
  return (await activityRows(projectId)).filter((row) => row.type === type).length;
}

describe('concurrent deletes: one 204, the rest 404, one activity record', function () {
  before(onPostgresqlOnly);
  this.timeout(120_000);
  let owner: TestUser;
  let other: TestUser;

  before(async () => {
    [owner, other] = [await signUp(), await signUp()];
  });

  it('deletes one insight', async () => {
    const project = await createProject(owner.token);
    const insight = await createInsight(owner.token, project.namespace, { title: 'Doomed', value: 1 });
    await oneWinner(() => call('DELETE', projectPath(project.namespace, `/insights/${insight.id}`), owner.token), 'delete insight');
    expect(await count('select count(*)::int as n from insights where id = ?', [insight.id])).to.equal(0);
    expect(await activityOf(project.id, 'insight.deleted')).to.equal(1);
  });

  it('deletes one feed', async () => {
    const project = await createProject(owner.token);
    expectData(await call('POST', projectPath(project.namespace, '/feeds'), owner.token, { name: 'doomed' }), 201);
    await oneWinner(() => call('DELETE', projectPath(project.namespace, '/feeds/doomed'), owner.token), 'delete feed');
    expect((await sql('select name from feeds where project_id = ?', [project.id])).map((row) => row.name)).to.deep.equal(['general']);
    expect(await activityOf(project.id, 'feed.deleted')).to.equal(1);
  });

  it('the owner removes one member', async () => {
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, other);
    await oneWinner(() => call('DELETE', projectPath(project.namespace, `/members/${other.username}`), owner.token), 'remove member');
    expect(await count('select count(*)::int as n from project_members where project_id = ?', [project.id])).to.equal(1);
    expect(await activityOf(project.id, 'member.removed')).to.equal(1);
  });

  it('a member leaves', async () => {
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, other);
    await oneWinner(() => call('DELETE', projectPath(project.namespace, `/members/${other.username}`), other.token), 'leave');
    expect(await count('select count(*)::int as n from project_members where project_id = ?', [project.id])).to.equal(1);
    expect(await activityOf(project.id, 'member.left')).to.equal(1);
  });

  it('the owner revokes one invite', async () => {
    const project = await createProject(owner.token);
    await invite(owner.token, project.namespace, other.username);
    await oneWinner(() => call('DELETE', projectPath(project.namespace, `/invites/${other.username}`), owner.token), 'revoke invite');
    expect((await rowsOfProject(project.id)).project_invites).to.equal(0);
    expect(await activityOf(project.id, 'invite.revoked')).to.equal(1);
  });

  it('the invitee declines its invite', async () => {
    const project = await createProject(owner.token);
    await invite(owner.token, project.namespace, other.username);
    await oneWinner(() => call('DELETE', projectPath(project.namespace, `/invites/${other.username}`), other.token), 'decline invite');
    expect((await rowsOfProject(project.id)).project_invites).to.equal(0);
    expect(await activityOf(project.id, 'invite.declined')).to.equal(1);
  });

  it('the invitee accepts its invite: one 200, the rest 404, one membership', async () => {
    const project = await createProject(owner.token);
    await invite(owner.token, project.namespace, other.username);
    const accept = () => call('PUT', projectPath(project.namespace, `/invites/${other.username}`), other.token);
    const answers = await Promise.all(Array.from({ length: RACERS }, accept));
    expect(
      answers.filter((answer) => answer.status === 200),
      answers.map((a) => a.status).join(' '),
    ).to.have.length(1);
    for (const answer of answers) if (answer.status !== 200) expectError(answer, 404, 'not_found', 'accept');
    expect(await count('select count(*)::int as n from project_members where project_id = ?', [project.id])).to.equal(2);
    expect(await activityOf(project.id, 'member.joined')).to.equal(1);
  });

  it('revokes one API token', async () => {
    const token = await apiToken(owner.token);
    const { id } = (await sql<{ id: string }>('select id from api_tokens where user_id = ? order by id desc limit 1', [owner.id]))[0]!;
    await oneWinner(() => call('DELETE', `/v1/auth/tokens/${id}`, owner.token), 'revoke API token');
    expect(await count('select count(*)::int as n from api_tokens where id = ?', [id])).to.equal(0);
    expect((await call('GET', '/v1/users/me', token)).status).to.equal(401);
  });

  it('deletes one project', async () => {
    const project = await createProject(owner.token);
    await oneWinner(() => call('DELETE', projectPath(project.namespace), owner.token), 'delete project');
    await expectNoRowsOfProject(project.id);
  });
});

describe('deleting a busy project', function () {
  before(onPostgresqlOnly);
  this.timeout(300_000);
  const WRITERS = 6;
  let owner: TestUser;

  before(async () => {
    owner = await signUp();
  });

  /**
   * `trials` times: a fresh project (made by `setUp`), `WRITERS` clients each repeating `write` until
   * it answers anything but a success, and, once they are under way, the owner's delete (repeated
   * until it answers 204, so a failed first delete is counted but cleaned up). Answers how many
   * deletes won the first time, and every status the deletes and the writers saw.
   */
  async function deleteWhileBusy(trials: number, setUp: (namespace: string) => Promise<() => Promise<Answer>>) {
    let firstTime = 0;
    let leftBehind = 0;
    let slowest = 0;
    const writes: number[] = [];
    const deletes: number[] = [];
    for (let trial = 0; trial < trials; trial++) {
      const project = await createProject(owner.token);
      const write = await setUp(project.namespace);
      const writer = async () => {
        for (let i = 0; i < 500; i++) {
          const answer = await write();
          writes.push(answer.status);
          if (answer.status === 404) expectError(answer, 404, 'not_found', 'writer after the delete');
          if (answer.status !== 200 && answer.status !== 201) return;
        }
      };
      const writers = Array.from({ length: WRITERS }, writer);
      await new Promise((resolve) => setTimeout(resolve, 20));
      for (let attempt = 0; attempt < 5; attempt++) {
        const started = Date.now();
        const answer = await call('DELETE', projectPath(project.namespace), owner.token);
        slowest = Math.max(slowest, Date.now() - started);
        deletes.push(answer.status);
        if (answer.status === 204 && attempt === 0) firstTime += 1;
        if (answer.status === 204) break;
      }
      await Promise.all(writers);
      leftBehind += await count('select count(*)::int as n from projects where id = ?', [project.id]);
      leftBehind += await count('select count(*)::int as n from events where project_id = ?', [project.id]);
    }
    return { firstTime, deletes: tally(deletes), writes: tally(writes), leftBehind, slowestDeleteMs: slowest };
  }

  function figures(result: Awaited<ReturnType<typeof deleteWhileBusy>>): string {
    const { firstTime, slowestDeleteMs, deletes, writes } = result;
    const statuses = `deletes ${JSON.stringify(deletes)}; writers ${JSON.stringify(writes)}`;
    return `${firstTime} won first time, slowest ${slowestDeleteMs} ms; ${statuses}`;
  }

  /**
   * Every delete answered 204 the first time, within seconds (a delete queued behind a stream of
   * writers that never lets go of the project's row would wait until the writers stop), and took
   * everything with it; the writers saw only `success` and 404.
   */
  function expectClean(result: Awaited<ReturnType<typeof deleteWhileBusy>>, trials: number, success: number): void {
    expect(result.firstTime, JSON.stringify(result)).to.equal(trials);
    expect(result.deletes, JSON.stringify(result)).to.deep.equal({ 204: trials });
    const unexpected = Object.keys(result.writes)
      .map(Number)
      .filter((status) => status !== success && status !== 404);
    expect(unexpected, JSON.stringify(result)).to.deep.equal([]);
    expect(result.leftBehind).to.equal(0);
    expect(result.slowestDeleteMs).to.be.below(5_000);
  }

  it('while its insights are incremented: the delete answers 204 the first time, the writers 200 or 404', async () => {
    const result = await deleteWhileBusy(15, async (namespace) => {
      const insights = await Promise.all([1, 2, 3].map((i) => createInsight(owner.token, namespace, { title: `Counter ${i}`, value: 0 })));
      let n = 0;
      return () => call('PATCH', projectPath(namespace, `/insights/${insights[n++ % insights.length].id}`), owner.token, { increment: 1 });
    });
    console.log(`      deletes during increments: ${figures(result)}`);
    expectClean(result, 15, 200);
  });

  it('while events are published: the delete answers 204 the first time, the publishers 201 or 404', async () => {
    const key = await apiToken(owner.token);
    const result = await deleteWhileBusy(15, async (namespace) => {
      expectData(await call('POST', projectPath(namespace, '/feeds'), owner.token, { name: 'second' }), 201);
      let n = 0;
      return () => call('POST', projectPath(namespace, `/feeds/${n++ % 2 ? 'general' : 'second'}/events`), key, { event: 'busy' });
    });
    console.log(`      deletes during publishes: ${figures(result)}`);
    expectClean(result, 15, 201);
  });

  it('while an invite to it is accepted: no 5xx, and no membership of the deleted project is left', async () => {
    const trials = 30;
    const accepts: number[] = [];
    const deletes: number[] = [];
    const leftBehind: Record<string, number>[] = [];
    for (let trial = 0; trial < trials; trial++) {
      const invitee = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, invitee.username);
      const [accepted, deleted] = await Promise.all([
        call('PUT', projectPath(project.namespace, `/invites/${invitee.username}`), invitee.token),
        call('DELETE', projectPath(project.namespace), owner.token),
      ]);
      accepts.push(accepted.status);
      deletes.push(deleted.status);
      if (deleted.status === 204) expectNoContent(deleted, `trial ${trial}: delete`);
      if (accepted.status === 200) expect(expectData(accepted).id).to.equal(project.id);
      if (accepted.status === 404) expectError(accepted, 404, 'not_found', `trial ${trial}: accept`);
      const rows = await rowsOfProject(project.id);
      if (Object.values(rows).some((n) => n > 0)) leftBehind.push(rows);
    }
    const seen = `accepts ${JSON.stringify(tally(accepts))}; deletes ${JSON.stringify(tally(deletes))}`;
    console.log(`      invite accepted during a delete, ${trials} trials: ${seen}`);
    expect(tally(deletes)).to.deep.equal({ 204: trials });
    expect(accepts.filter((status) => status !== 200 && status !== 404)).to.deep.equal([]);
    expect(leftBehind).to.deep.equal([]);
  });
});
