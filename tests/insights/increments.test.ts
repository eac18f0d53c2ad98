/**
 * Increments of one insight, concurrent: the service stores those that arrive while the previous
 * group is being stored together, in one statement (domain/insights.ts `incrementInsightBy`), and
 * each request still answers the value as if the increments had run one after another, with one
 * `insight.updated` record per request. Checked over real HTTP, against the database.
 *
 * The amounts are whole numbers plus 1/256 (exact in binary and in PostgreSQL's numeric): any k of
 * them sum to a whole number plus k/256, never 0 for k < 256, so every answer's value is distinct
 * and tells where in the order its increment went (`position`).
 */
import { expect } from 'chai';
import { count, database, sql, startExtraServer, type TestServer } from '../support/harness.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError, expectInvalid, tally, type Answer } from '../support/http.js';
import { addMember, createInsight, createProject, projectPath } from '../support/projects.js';

const STEP = 1 / 256;

function insightPath(namespace: string, id: string): string {
  return projectPath(namespace, `/insights/${id}`);
}

async function storedValue(id: string): Promise<unknown> {
  const [row] = await sql<{ value: unknown }>('select value from insights where id = ?', [id]);
  return row?.value;
}

/** The project's `insight.updated` records of the insight, oldest first: actor and data. */
async function incrementRecords(
  projectId: string,
  insightId: string,
): Promise<{ actor_id: string | null; data: any; created_at: string }[]> {
  const rows = await sql<{ actor_id: string | null; data: any; created_at: unknown }>(
    `select actor_id, data, created_at from activity where project_id = ? and type = 'insight.updated' order by id`,
    [projectId],
  );
  return rows
    .filter((row) => row.data?.insight_id === insightId)
    .map((row) => ({ ...row, created_at: new Date(row.created_at as string).toISOString() }));
}

/** `n` amounts: a whole number in [-50, 50] plus 1/256 each, from a fixed seed. */
function amounts(n: number, seed = 7): number[] {
  let state = seed;
  const next = () => (state = (state * 1103515245 + 12345) % 2 ** 31);
  return Array.from({ length: n }, () => (next() % 101) - 50 + STEP);
}

/** Where an answer's increment went in the order: k/256 of `value - start` is the k-th. */
function position(value: number, start: number): number {
  const scaled = Math.round((value - start) * 256);
  return ((scaled % 256) + 256) % 256;
}

/**
 * The answers (each with its amount) are exactly the running sums from `start` of one order of the
 * increments: their positions are 1…n once each, and each answer is the one before it plus its own
 * amount. Answers the indexes of the requests in that order.
 */
function expectRunningSums(answers: { value: number; by: number }[], start: number): number[] {
  const order = answers.map((answer, i) => ({ i, at: position(answer.value, start) })).sort((a, b) => a.at - b.at);
  expect(
    order.map((entry) => entry.at),
    'every answer a distinct place in one order',
  ).to.deep.equal(answers.map((_, i) => i + 1));
  let value = start;
  for (const { i } of order) {
    value += answers[i]!.by;
    expect(answers[i]!.value, `answer ${i} (increment of ${answers[i]!.by})`).to.equal(value);
  }
  return order.map((entry) => entry.i);
}

describe('concurrent increments of one insight', function () {
  this.timeout(120_000);
  let owner: TestUser;
  let mates: TestUser[];
  let project: any;

  before(async () => {
    owner = await signUp();
    mates = [await signUp(), await signUp(), await signUp()];
    project = await createProject(owner.token, { name: 'Counted' });
    for (const mate of mates) await addMember(owner.token, project.namespace, mate);
  });

  it('200 at once, positive, negative and fractional, by 4 members: each answers its running sum; the value and the records are exact', async () => {
    const start = 1000;
    const insight = await createInsight(owner.token, project.namespace, { title: 'Balance', value: start });
    const callers = [owner, ...mates];
    const by = amounts(200);
    const answers = await Promise.all(
      by.map((amount, i) =>
        call('PATCH', insightPath(project.namespace, insight.id), callers[i % callers.length]!.token, { increment: amount }),
      ),
    );
    const values = answers.map((answer) => {
      const data = expectData(answer);
      expect(data).to.deep.equal({ ...insight, value: data.value, updated_at: data.updated_at });
      return data.value as number;
    });
    expect(new Set(values).size, 'distinct values').to.equal(200);
    const order = expectRunningSums(
      values.map((value, i) => ({ value, by: by[i]! })),
      start,
    );
    const total = start + by.reduce((sum, amount) => sum + amount, 0);
    expect(await storedValue(insight.id)).to.equal(total);

    // One record per request, by its caller, in the order the values say the increments ran.
    const records = await incrementRecords(project.id, insight.id);
    expect(records).to.have.length(200);
    for (const record of records) expect(record.data).to.deep.equal({ insight_id: insight.id, fields: ['increment'] });
    expect(records.map((record) => record.actor_id)).to.deep.equal(order.map((i) => callers[i % callers.length]!.id));
    // A group's records share its time. On PostgreSQL the requests overlap and go in groups; the
    // embedded database serves one statement at a time, and there they may well go one by one.
    const groups = new Set(records.map((record) => record.created_at)).size;
    console.log(`      200 increments stored in ${groups} groups`);
    if (database().kind === 'postgresql') expect(groups).to.be.below(200);
  });

  it('adds decimals as PostgreSQL numeric, as one after another would: ten increments of 0.1 answer 0.1 … 1 exactly', async () => {
    const insight = await createInsight(owner.token, project.namespace, { title: 'Tenths', value: 0 });
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => call('PATCH', insightPath(project.namespace, insight.id), owner.token, { increment: 0.1 })),
    );
    const values = answers.map((answer) => expectData(answer).value as number).sort((a, b) => a - b);
    expect(values).to.deep.equal([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]);
    expect(await storedValue(insight.id)).to.equal(1);
  });

  it('keeps each request to its own project: the same insight named under another project is 404 and counts nothing', async () => {
    const other = await createProject(owner.token);
    const insight = await createInsight(owner.token, project.namespace, { title: 'Mine', value: 0 });
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        call('PATCH', insightPath(i % 2 ? other.namespace : project.namespace, insight.id), owner.token, { increment: 1 }),
      ),
    );
    answers.forEach((answer, i) => {
      if (i % 2) expectError(answer, 404, 'not_found');
      else expectData(answer);
    });
    expect(answers.filter((_, i) => i % 2 === 0).map((answer) => answer.json.data.value as number)).to.have.members(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    expect(await storedValue(insight.id)).to.equal(20);
    expect(await incrementRecords(project.id, insight.id)).to.have.length(20);
    expect(await count(`select count(*)::int from activity where project_id = ?`, [other.id])).to.equal(1); // project.created
  });

  it('racing a delete of the insight: each increment 200 or 404; the 200s are the running sums, one record each, and nothing is left', async () => {
    const start = 5;
    const insight = await createInsight(owner.token, project.namespace, { title: 'Doomed', value: start });
    const by = amounts(120, 11);
    const increment = (i: number) =>
      call('PATCH', insightPath(project.namespace, insight.id), mates[i % mates.length]!.token, { increment: by[i] });
    // The delete goes once 20 of a first wave of 60 have answered, with a second wave of 60 beside it.
    let answered = 0;
    let someAnswered!: () => void;
    const twenty = new Promise<void>((resolve) => (someAnswered = resolve));
    const firstWave = by.slice(0, 60).map((_, i) =>
      increment(i).then((answer) => {
        if (++answered === 20) someAnswered();
        return answer;
      }),
    );
    await twenty;
    const deleted = call('DELETE', insightPath(project.namespace, insight.id), owner.token);
    const secondWave = by.slice(60).map((_, i) => increment(60 + i));
    const answers = await Promise.all([...firstWave, ...secondWave]);
    expect((await deleted).status).to.equal(204);
    const applied: { value: number; by: number }[] = [];
    answers.forEach((answer: Answer, i) => {
      if (answer.status === 404) return expectError(answer, 404, 'not_found');
      applied.push({ value: expectData(answer).value as number, by: by[i]! });
    });
    console.log(`      increments racing a delete: ${JSON.stringify(tally(answers.map((answer) => answer.status)))}`);
    expectRunningSums(applied, start);
    expect(await count('select count(*)::int from insights where id = ?', [insight.id])).to.equal(0);
    expect(await incrementRecords(project.id, insight.id)).to.have.length(applied.length);
    const deletes = await sql<{ data: any }>(`select data from activity where project_id = ? and type = 'insight.deleted'`, [project.id]);
    expect(deletes.filter((row) => row.data.insight_id === insight.id)).to.have.length(1);
    // Sent after the delete answered: every one 404.
    const late = await Promise.all(Array.from({ length: 10 }, (_, i) => increment(i)));
    for (const answer of late) expectError(answer, 404, 'not_found');
    expect(await incrementRecords(project.id, insight.id)).to.have.length(applied.length);
  });

  it('refuses concurrent increments of a value that is not a number, each with 400 at /body/increment, and changes nothing', async () => {
    const insight = await createInsight(owner.token, project.namespace, { title: 'Status', value: 'green' });
    const before = await count('select count(*)::int from activity where project_id = ?', [project.id]);
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => call('PATCH', insightPath(project.namespace, insight.id), owner.token, { increment: 1 })),
    );
    for (const answer of answers) expectInvalid(answer, '/body/increment');
    expect(await storedValue(insight.id)).to.equal('green');
    expect(await count('select count(*)::int from activity where project_id = ?', [project.id])).to.equal(before);
  });

  it('refuses increment combined with value with 400, also while increments run, and changes nothing', async () => {
    const insight = await createInsight(owner.token, project.namespace, { title: 'Mixed', value: 0 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call('PATCH', insightPath(project.namespace, insight.id), owner.token, i % 2 ? { increment: 1, value: 9 } : { increment: 1 }),
      ),
    );
    answers.forEach((answer, i) => {
      if (i % 2) expectInvalid(answer, '/body/increment');
      else expectData(answer);
    });
    expect(await storedValue(insight.id)).to.equal(10);
    expect(await incrementRecords(project.id, insight.id)).to.have.length(10);
  });

  it('an increment with a title goes its own way, atomically with the others: one record each, the value exact', async () => {
    const insight = await createInsight(owner.token, project.namespace, { title: 'Renamed', value: 0 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call('PATCH', insightPath(project.namespace, insight.id), owner.token, i % 4 ? { increment: 1 } : { increment: 1, title: `T${i}` }),
      ),
    );
    expect(answers.map((answer) => expectData(answer).value as number)).to.have.members(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await storedValue(insight.id)).to.equal(20);
    const records = await incrementRecords(project.id, insight.id);
    expect(records.map((record) => record.data.fields).filter((fields) => fields.includes('title'))).to.have.length(5);
    expect(records).to.have.length(20);
  });

  it('with Idempotency-Key: concurrent first sends are applied once each, their resends replay the same answer and add nothing', async () => {
    const insight = await createInsight(owner.token, project.namespace, { title: 'Keyed', value: 0 });
    const keys = Array.from({ length: 20 }, (_, i) => `inc-${insight.id}-${i}`);
    const send = (key: string) =>
      call('PATCH', insightPath(project.namespace, insight.id), owner.token, { increment: 2 }, { 'Idempotency-Key': key });
    const firsts = await Promise.all(keys.map(send));
    const values = firsts.map((answer) => expectData(answer).value as number);
    expect(values).to.have.members(Array.from({ length: 20 }, (_, i) => 2 * (i + 1)));
    const again = await Promise.all(keys.map(send));
    again.forEach((answer, i) => {
      expect(answer.status).to.equal(200);
      expect(answer.headers.get('idempotent-replayed')).to.equal('true');
      expect(answer.text).to.equal(firsts[i]!.text);
    });
    expect(await storedValue(insight.id)).to.equal(40);
    expect(await incrementRecords(project.id, insight.id)).to.have.length(20);
  });

  describe('two instances on one database (PostgreSQL)', () => {
    let extra: TestServer | undefined;
    before(function () {
      if (database().kind !== 'postgresql') this.skip();
    });
    after(async () => {
      await extra?.close();
    });

    it('increments split between them: the value exact, every answer a distinct running sum of one order', async () => {
      extra = await startExtraServer();
      const start = -20;
      const insight = await createInsight(owner.token, project.namespace, { title: 'Shared', value: start });
      const by = amounts(160, 23);
      const answers = await Promise.all(
        by.map((amount, i) =>
          i % 2
            ? callAt(extra!.url, 'PATCH', insightPath(project.namespace, insight.id), mates[0]!.token, { increment: amount })
            : call('PATCH', insightPath(project.namespace, insight.id), mates[1]!.token, { increment: amount }),
        ),
      );
      expectRunningSums(
        answers.map((answer, i) => ({ value: expectData(answer).value as number, by: by[i]! })),
        start,
      );
      expect(await storedValue(insight.id)).to.equal(start + by.reduce((sum, amount) => sum + amount, 0));
      const records = await incrementRecords(project.id, insight.id);
      expect(records).to.have.length(160);
      expect(records.filter((record) => record.actor_id === mates[0]!.id)).to.have.length(80);
    });
  });
});
