/**
 * Insights: create, list, change, increment atomically, delete, always within the
 * project the path names; and the activity log every change writes, newest first, with its actor.
 */
import { expect } from 'chai';
import { sql } from '../support/harness.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid, expectNoContent, ISO_UTC, UUID7, walk } from '../support/http.js';
import { accept, activityRows, addMember, createInsight, createProject, invite, member, projectPath } from '../support/projects.js';

async function insightRow(id: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await sql('select id, project_id, title, value, emoji from insights where id = ?', [id]);
  return row;
}

function insightsPath(namespace: string, id?: string): string {
  return projectPath(namespace, `/insights${id ? `/${id}` : ''}`);
}

describe('insights', () => {
  let owner: TestUser;
  let project: any;
  before(async () => {
    owner = await signUp();
    project = await createProject(owner.token, { name: 'Insightful' });
  });

  describe('POST …/insights', () => {
    for (const value of [42, -3.5, 0, true, false, 'green', '', 'x'.repeat(256)]) {
      it(`answers 201 with the insight for the value ${JSON.stringify(value).slice(0, 20)}, and stores it`, async () => {
        const answer = await call('POST', insightsPath(project.namespace), owner.token, { title: 'Signups', value, emoji: '🚀' });
        const insight = expectData(answer, 201);
        expect(insight).to.deep.equal({
          id: insight.id,
          title: 'Signups',
          value,
          emoji: '🚀',
          created_at: insight.created_at,
          updated_at: insight.updated_at,
        });
        expect(insight.id).to.match(UUID7);
        expect(insight.created_at).to.match(ISO_UTC);
        expect(insight.updated_at).to.match(ISO_UTC);
        expect(await insightRow(insight.id)).to.deep.equal({
          id: insight.id,
          project_id: project.id,
          title: 'Signups',
          value,
          emoji: '🚀',
        });
      });
    }

    it('makes the emoji null when it is left out', async () => {
      const insight = expectData(await call('POST', insightsPath(project.namespace), owner.token, { title: 'No emoji', value: 1 }), 201);
      expect(insight.emoji).to.equal(null);
      expect(await insightRow(insight.id)).to.deep.include({ emoji: null });
    });

    it('takes emoji: null (the contract says Emoji | null) and stores no emoji', async () => {
      const insight = expectData(
        await call('POST', insightsPath(project.namespace), owner.token, { title: 'Null emoji', value: 1, emoji: null }),
        201,
      );
      expect(insight.emoji).to.equal(null);
      expect(await insightRow(insight.id)).to.deep.include({ emoji: null });
    });

    const refused: [string, Record<string, unknown>, string][] = [
      ['a 257-character string', { title: 'Too long', value: 'x'.repeat(257) }, '/body/value'],
      ['an object value', { title: 'Object', value: { n: 1 } }, '/body/value'],
      ['an array value', { title: 'Array', value: [1] }, '/body/value'],
      ['a null value', { title: 'Null', value: null }, '/body/value'],
      ['no value', { title: 'Missing' }, '/body/value'],
      ['an empty title', { title: '', value: 1 }, '/body/title'],
      ['a 101-character title', { title: 't'.repeat(101), value: 1 }, '/body/title'],
      ['a 33-character emoji', { title: 'Emoji', value: 1, emoji: 'e'.repeat(33) }, '/body/emoji'],
      ['an unknown field', { title: 'Extra', value: 1, increment: 1 }, '/body'],
    ];
    for (const [what, body, path] of refused) {
      it(`refuses ${what} with 400, and stores nothing`, async () => {
        const fresh = await createProject(owner.token);
        const answer = await call('POST', insightsPath(fresh.namespace), owner.token, body);
        if (path === '/body') expectError(answer, 400, 'invalid_request');
        else expectInvalid(answer, path);
        expect(await sql('select id from insights where project_id = ?', [fresh.id])).to.deep.equal([]);
      });
    }
  });

  describe('GET …/insights', () => {
    it('lists the project’s insights newest first, paginated, and only that project’s', async () => {
      const mine = await createProject(owner.token);
      const other = await createProject(owner.token);
      const a = await createInsight(owner.token, mine.namespace, { title: 'A', value: 1 });
      await createInsight(owner.token, other.namespace, { title: 'Elsewhere', value: 1 });
      const b = await createInsight(owner.token, mine.namespace, { title: 'B', value: 'two' });
      const c = await createInsight(owner.token, mine.namespace, { title: 'C', value: true, emoji: '✅' });
      expect(expectData(await call('GET', insightsPath(mine.namespace), owner.token))).to.deep.equal({
        items: [c, b, a],
        next_cursor: null,
      });
      const first = expectData(await call('GET', `${insightsPath(mine.namespace)}?limit=2`, owner.token));
      expect(first.items).to.deep.equal([c, b]);
      expect(first.next_cursor).to.be.a('string');
      const second = expectData(
        await call('GET', `${insightsPath(mine.namespace)}?limit=2&cursor=${encodeURIComponent(first.next_cursor)}`, owner.token),
      );
      expect(second).to.deep.equal({ items: [a], next_cursor: null });
    });

    it('walks 10 insights 3 at a time: every insight exactly once, newest first', async () => {
      const fresh = await createProject(owner.token);
      const made = [];
      for (let i = 0; i < 10; i++) made.push(await createInsight(owner.token, fresh.namespace, { title: `Figure ${i}`, value: i }));
      const walked = await walk(owner.token, insightsPath(fresh.namespace), 3);
      expect(walked.pages).to.deep.equal([3, 3, 3, 1]);
      expect(walked.items).to.deep.equal([...made].reverse());
      expect(new Set(walked.items.map((i: any) => i.id)).size).to.equal(10);
    });

    it('lists nothing for a project without insights', async () => {
      const fresh = await createProject(owner.token);
      expect(expectData(await call('GET', insightsPath(fresh.namespace), owner.token))).to.deep.equal({ items: [], next_cursor: null });
    });
  });

  describe('PATCH …/insights/{insight_id}', () => {
    it('changes title, value and emoji; answers the whole insight with a later updated_at', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Before', value: 1, emoji: '🐢' });
      await new Promise((r) => setTimeout(r, 5));
      const changed = expectData(
        await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { title: 'After', value: 'fast', emoji: '🐇' }),
      );
      expect(changed).to.deep.equal({ ...insight, title: 'After', value: 'fast', emoji: '🐇', updated_at: changed.updated_at });
      expect(Date.parse(changed.updated_at)).to.be.greaterThan(Date.parse(insight.updated_at));
      expect(await insightRow(insight.id)).to.deep.include({ title: 'After', value: 'fast', emoji: '🐇' });

      expect(
        expectData(await call('GET', insightsPath(project.namespace), owner.token)).items.find((i: any) => i.id === insight.id),
      ).to.deep.equal(changed);
    });

    it('clears the emoji with emoji: null (the contract says Emoji | null)', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Marked', value: 1, emoji: '🔖' });
      const cleared = expectData(
        await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { emoji: null, value: false }),
      );
      expect(cleared).to.deep.equal({ ...insight, value: false, emoji: null, updated_at: cleared.updated_at });
      expect(await insightRow(insight.id)).to.deep.include({ value: false, emoji: null });
    });

    it('adds an increment to a number, negative and fractional too', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Count', value: 5 });
      expect(expectData(await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { increment: 2.5 })).value).to.equal(
        7.5,
      );
      expect(expectData(await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { increment: -10 })).value).to.equal(
        -2.5,
      );
      expect(await insightRow(insight.id)).to.deep.include({ value: -2.5 });
    });

    it('refuses increment together with value with 400, and changes nothing', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Both', value: 5 });
      expectInvalid(
        await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { increment: 1, value: 9 }),
        '/body/increment',
      );
      expect(await insightRow(insight.id)).to.deep.include({ value: 5 });
    });

    for (const value of ['five', true]) {
      it(`refuses an increment on a ${typeof value} value with 400, and changes nothing (title included)`, async () => {
        const insight = await createInsight(owner.token, project.namespace, { title: 'Not a number', value });
        const before = await activityRows(project.id);
        expectInvalid(
          await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { increment: 1, title: 'Changed' }),
          '/body/increment',
        );
        expect(await insightRow(insight.id)).to.deep.include({ title: 'Not a number', value });
        expect(await activityRows(project.id)).to.deep.equal(before);
      });
    }

    it('loses no increment: 50 concurrent increments of 1 add exactly 50', async function () {
      this.timeout(60_000);
      const mate = await signUp();
      const shared = await createProject(owner.token);
      await addMember(owner.token, shared.namespace, mate);
      const insight = await createInsight(owner.token, shared.namespace, { title: 'Hits', value: 1000 });
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          call('PATCH', insightsPath(shared.namespace, insight.id), i % 2 ? mate.token : owner.token, { increment: 1 }),
        ),
      );
      expect(answers.map((a) => a.status)).to.deep.equal(Array(50).fill(200));
      expect(await insightRow(insight.id)).to.deep.include({ value: 1050 });
      expect(expectData(await call('GET', insightsPath(shared.namespace), owner.token)).items[0].value).to.equal(1050);
      // Every answer saw a value no other answer saw.
      expect(new Set(answers.map((a) => a.json.data.value)).size).to.equal(50);
      expect((await activityRows(shared.id)).filter((r) => r.type === 'insight.updated')).to.have.length(50);
    });

    it('answers 404 not_found for an insight of another project, on PATCH and DELETE, and changes nothing', async () => {
      const other = await createProject(owner.token);
      const foreign = await createInsight(owner.token, other.namespace, { title: 'Foreign', value: 7 });
      for (const body of [{ title: 'Hijacked' }, { increment: 1 }, { value: 0 }]) {
        expectError(
          await call('PATCH', insightsPath(project.namespace, foreign.id), owner.token, body),
          404,
          'not_found',
          JSON.stringify(body),
        );
      }
      expectError(await call('DELETE', insightsPath(project.namespace, foreign.id), owner.token), 404, 'not_found');
      expect(await insightRow(foreign.id)).to.deep.equal({ id: foreign.id, project_id: other.id, title: 'Foreign', value: 7, emoji: null });
      expect((await activityRows(project.id)).filter((r) => r.data?.insight_id === foreign.id)).to.deep.equal([]);
    });

    it('answers 404 not_found for an unknown insight id', async () => {
      const unknown = '01900000-0000-7000-8000-000000000000';
      expectError(await call('PATCH', insightsPath(project.namespace, unknown), owner.token, { title: 'Ghost' }), 404, 'not_found');
      expectError(await call('PATCH', insightsPath(project.namespace, unknown), owner.token, { increment: 1 }), 404, 'not_found');
      expectError(await call('DELETE', insightsPath(project.namespace, unknown), owner.token), 404, 'not_found');
    });

    it('answers 400 at /path/insight_id for a malformed insight id', async () => {
      for (const bad of ['not-a-uuid', '12345', '01900000-0000-7000-8000-00000000000g']) {
        expectInvalid(await call('PATCH', insightsPath(project.namespace, bad), owner.token, { title: 'X' }), '/path/insight_id', bad);
        expectInvalid(await call('DELETE', insightsPath(project.namespace, bad), owner.token), '/path/insight_id', bad);
      }
    });

    it('refuses an increment beyond ±1e12 and an unknown field with 400', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Bounded', value: 1 });
      expectInvalid(await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { increment: 2e12 }), '/body/increment');
      expectError(await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { colour: 'red' }), 400, 'invalid_request');
      expect(await insightRow(insight.id)).to.deep.include({ value: 1 });
    });
  });

  describe('DELETE …/insights/{insight_id}', () => {
    it('answers 204 with no body; the row is gone; a second delete is 404', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Doomed', value: 1 });
      expectNoContent(await call('DELETE', insightsPath(project.namespace, insight.id), owner.token));
      expect(await insightRow(insight.id)).to.equal(undefined);
      expectError(await call('DELETE', insightsPath(project.namespace, insight.id), owner.token), 404, 'not_found');
      expectError(await call('PATCH', insightsPath(project.namespace, insight.id), owner.token, { title: 'Back?' }), 404, 'not_found');
      expect(expectData(await call('GET', insightsPath(project.namespace), owner.token)).items.map((i: any) => i.id)).to.not.include(
        insight.id,
      );
    });
  });
});

describe('activity', () => {
  it('records every change, newest first, with its actor {id, username, icon} and what changed', async function () {
    this.timeout(30_000);
    const [owner, mate, leaver, decliner, revoked] = await Promise.all([signUp(), signUp(), signUp(), signUp(), signUp()]);
    const project = await createProject(owner.token, { name: 'Logged' });
    const ns: string = project.namespace;
    const expected: { type: string; actor: TestUser; data?: Record<string, unknown> }[] = [];
    const step = (type: string, actor: TestUser, data?: Record<string, unknown>) =>
      expected.push({ type, actor, ...(data ? { data } : {}) });

    step('project.created', owner, { namespace: ns, name: 'Logged' });
    const moved = `${ns}-2`.slice(0, 40).replace(/-$/, 'x');
    expectData(await call('PATCH', projectPath(ns), owner.token, { name: 'Logged too', namespace: moved }));
    step('project.updated', owner, { changes: { name: { from: 'Logged', to: 'Logged too' }, namespace: { from: ns, to: moved } } });

    const insight = await createInsight(owner.token, moved, { title: 'Visits', value: 1 });
    step('insight.created', owner, { insight_id: insight.id, title: 'Visits' });

    await invite(owner.token, moved, mate.username);
    step('invite.created', owner, { username: mate.username });
    await accept(mate.token, moved, mate.username);
    step('member.joined', mate, { username: mate.username });

    expectData(await call('PATCH', insightsPath(moved, insight.id), mate.token, { increment: 4 }));
    step('insight.updated', mate, { insight_id: insight.id });
    expectNoContent(await call('DELETE', insightsPath(moved, insight.id), mate.token));
    step('insight.deleted', mate, { insight_id: insight.id, title: 'Visits' });

    await invite(owner.token, moved, decliner.username);
    step('invite.created', owner, { username: decliner.username });
    expectNoContent(await call('DELETE', projectPath(moved, `/invites/${decliner.username}`), decliner.token));
    step('invite.declined', decliner, { username: decliner.username });

    await invite(owner.token, moved, revoked.username);
    step('invite.created', owner, { username: revoked.username });
    expectNoContent(await call('DELETE', projectPath(moved, `/invites/${revoked.username}`), owner.token));
    step('invite.revoked', owner, { username: revoked.username });

    await invite(owner.token, moved, leaver.username);
    step('invite.created', owner, { username: leaver.username });
    await accept(leaver.token, moved, leaver.username);
    step('member.joined', leaver, { username: leaver.username });
    expectNoContent(await call('DELETE', projectPath(moved, `/members/${leaver.username}`), leaver.token));
    step('member.left', leaver, { username: leaver.username });

    expectNoContent(await call('DELETE', projectPath(moved, `/members/${mate.username}`), owner.token));
    step('member.removed', owner, { username: mate.username });

    // Refused requests write nothing.
    expectError(await call('DELETE', projectPath(moved, `/members/${owner.username}`), owner.token), 409, 'owner_cannot_leave');
    expectError(await call('PATCH', projectPath(moved), mate.token, { name: 'Not a member' }), 404, 'not_found');

    const page = expectData(await call('GET', `${projectPath(moved, '/activity')}?limit=100`, owner.token));
    expect(page.next_cursor).to.equal(null);
    const newestFirst = [...expected].reverse();
    expect(page.items.map((a: any) => a.type)).to.deep.equal(newestFirst.map((e) => e.type));
    page.items.forEach((entry: any, i: number) => {
      const want = newestFirst[i]!;
      expect(Object.keys(entry).sort(), entry.type).to.deep.equal(['actor', 'created_at', 'data', 'id', 'type']);
      expect(entry.id).to.match(UUID7);
      expect(entry.created_at).to.match(ISO_UTC);
      expect(entry.actor, `${i}: ${entry.type}`).to.deep.equal(member(want.actor));
      expect(entry.data, `${i}: ${entry.type}`).to.be.an('object');
      if (want.data) expect(entry.data, `${i}: ${entry.type}`).to.deep.include(want.data);
    });
    // Ids descend and times never go forward as the list goes on.
    for (let i = 1; i < page.items.length; i++) {
      expect(page.items[i].id < page.items[i - 1].id).to.equal(true);
      expect(Date.parse(page.items[i].created_at)).to.be.at.most(Date.parse(page.items[i - 1].created_at));
    }
    // The database holds exactly these records, no more.
    expect((await activityRows(project.id)).map((r) => r.id)).to.deep.equal(page.items.map((a: any) => a.id));
  });

  it('writes nothing for a change that changes nothing or is refused', async () => {
    const [owner, mate] = await Promise.all([signUp(), signUp()]);
    const project = await createProject(owner.token, { name: 'Quiet' });
    await addMember(owner.token, project.namespace, mate);
    const before = await activityRows(project.id);
    expectData(await call('PATCH', projectPath(project.namespace), owner.token, {}));
    expectData(await call('PATCH', projectPath(project.namespace), owner.token, { name: 'Quiet', namespace: project.namespace }));
    expectError(await call('PATCH', projectPath(project.namespace), mate.token, { name: 'Loud' }), 403, 'not_owner');
    expectError(
      await call('POST', insightsPath(project.namespace), mate.token, { title: 'Bad', value: 'x'.repeat(257) }),
      400,
      'invalid_request',
    );
    expectError(
      await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: mate.username }),
      409,
      'already_member',
    );
    expect(await activityRows(project.id)).to.deep.equal(before);
  });

  it('walks the log 2 at a time: every record exactly once, in the one-page order', async function () {
    this.timeout(30_000);
    const owner = await signUp();
    const project = await createProject(owner.token);
    for (let i = 0; i < 6; i++) await createInsight(owner.token, project.namespace, { title: `N${i}`, value: i });
    const whole = expectData(await call('GET', `${projectPath(project.namespace, '/activity')}?limit=100`, owner.token));
    expect(whole.items).to.have.length(7);
    const walked = await walk(owner.token, projectPath(project.namespace, '/activity'), 2);
    expect(walked.pages).to.deep.equal([2, 2, 2, 1]);
    expect(walked.items).to.deep.equal(whole.items);
    expect(new Set(walked.items.map((a: any) => a.id)).size).to.equal(7);
    expect(walked.items.at(-1).type).to.equal('project.created');
  });

  it('shows a null actor once the actor’s account is gone, and keeps the record', async () => {
    const [owner, mate] = await Promise.all([signUp(), signUp()]);
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    await createInsight(mate.token, project.namespace, { title: 'By mate', value: 1 });
    await sql('delete from users where id = ?', [mate.id]);
    const page = expectData(await call('GET', projectPath(project.namespace, '/activity'), owner.token));
    expect(page.items[0]).to.deep.include({ type: 'insight.created', actor: null });
    expect(page.items[1]).to.deep.include({ type: 'member.joined', actor: null });
  });
});
