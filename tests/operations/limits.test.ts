/**
 * Caps on what a user can grow (feeds and insights of a project, its members plus pending invites,
 * projects a user owns, API tokens), each refused with 409 `limit_reached`, changing nothing, and
 * exact under concurrency; and the bound they buy: no answer passes 1 MiB, however full the
 * project or the list, and a list stopped by the byte budget continues through its cursor.
 */
import { expect } from 'chai';
import { v7 } from 'uuid';
import type { RunningServer } from '../../server/src/server.js';
import { count, secret, sql, startExtraServer } from '../support/harness.js';
import { signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, tally, type Answer } from '../support/http.js';
import { createInsight, createProject, namespaceName, projectPath } from '../support/projects.js';

const MiB = 1024 * 1024;

/** The exact refusal of a cap at `value`, read from `setting`; `what` is the count the message starts with. */
function expectLimit(answer: Answer, what: string, setting: string, value: number): void {
  expect(answer.status, answer.text).to.equal(409);
  expect(answer.json).to.deep.equal({
    success: false,
    error: {
      code: 'limit_reached',
      message: `${what}: the limit is ${value} (${setting}).`,
      details: [{ path: `/limits/${setting}`, message: `at most ${value}` }],
    },
  });
}

describe('caps (each at 3, on a server of their own)', function () {
  this.timeout(120_000);
  const CAP = 3;
  let server: RunningServer;

  /** A JSON call to this server. */
  const on = (method: string, path: string, token?: string, body?: unknown): Promise<Answer> =>
    callAt(server.url, method, path, token, body);
  /** This server's database (in embedded mode not the run's). */
  const db = <T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> => sql<T>(text, params, server.db);
  const rows = (text: string, params: unknown[]): Promise<number> => count(text, params, server.db);
  const account = (): Promise<TestUser> => signUpOn(server);

  async function project(token: string): Promise<{ id: string; namespace: string }> {
    const answer = await on('POST', '/v1/projects', token, { name: 'Capped', namespace: namespaceName('cap') });
    expect(answer.status, answer.text).to.equal(201);
    return answer.json.data;
  }

  /** Accounts made straight in this server's database: enough to invite, not to sign in. */
  async function bareUsers(n: number): Promise<string[]> {
    const prefix = uniqueName('bare').toLowerCase();
    const names = Array.from({ length: n }, (_, i) => `${prefix}_${i}`.slice(-32));
    for (const username of names) {
      await db(
        `insert into users (id, username, email, password_hash, icon, created_at, updated_at)
                values (?, ?, ?, 'x', null, now(), now())`,
        [v7(), username, `${username}@example.com`],
      );
    }
    return names;
  }

  /** `n` requests at once, made by `request(i)`. */
  function burst(n: number, request: (i: number) => Promise<Answer>): Promise<Answer[]> {
    return Promise.all(Array.from({ length: n }, (_, i) => request(i)));
  }

  before(async () => {
    server = await startExtraServer({
      MAX_FEEDS_PER_PROJECT: String(CAP),
      MAX_INSIGHTS_PER_PROJECT: String(CAP),
      MAX_MEMBERS_PER_PROJECT: String(CAP),
      MAX_PROJECTS_PER_USER: String(CAP),
      MAX_API_TOKENS_PER_USER: String(CAP),
      BCRYPT_ROUNDS: '4',
    });
  });
  after(async () => {
    await server?.close();
  });

  it('feeds: the 4th is refused, nothing written; 30 concurrent creates at 2 leave exactly 3', async () => {
    const owner = await account();
    const { id, namespace } = await project(owner.token);
    const feed = (name: string) => on('POST', projectPath(namespace, '/feeds'), owner.token, { name });
    for (const name of ['second', 'third']) expect((await feed(name)).status).to.equal(201);
    expectLimit(await feed('fourth'), 'This project has 3 feeds', 'MAX_FEEDS_PER_PROJECT', CAP);
    const names = (await db('select name from feeds where project_id = ? order by created_at', [id])).map((r) => r.name);
    expect(names).to.deep.equal(['general', 'second', 'third']);
    expect(await rows(`select count(*)::int as n from activity where project_id = ? and type = 'feed.created'`, [id])).to.equal(2);

    const racing = await project(owner.token);
    expect((await on('POST', projectPath(racing.namespace, '/feeds'), owner.token, { name: 'second' })).status).to.equal(201);
    const answers = await burst(30, (i) => on('POST', projectPath(racing.namespace, '/feeds'), owner.token, { name: `racer-${i}` }));
    expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 29 });
    for (const answer of answers.filter((a) => a.status === 409)) {
      expectLimit(answer, 'This project has 3 feeds', 'MAX_FEEDS_PER_PROJECT', CAP);
    }
    expect(await rows('select count(*)::int as n from feeds where project_id = ?', [racing.id])).to.equal(CAP);
  });

  it('insights: the 4th is refused, nothing written; 30 concurrent creates at 2 leave exactly 3', async () => {
    const owner = await account();
    const { id, namespace } = await project(owner.token);
    const insight = (where: string, title: string) => on('POST', projectPath(where, '/insights'), owner.token, { title, value: 1 });
    for (let i = 0; i < CAP; i++) expect((await insight(namespace, `n${i}`)).status).to.equal(201);
    expectLimit(await insight(namespace, 'over'), 'This project has 3 insights', 'MAX_INSIGHTS_PER_PROJECT', CAP);
    expect(await rows('select count(*)::int as n from insights where project_id = ?', [id])).to.equal(CAP);
    expect(await rows(`select count(*)::int as n from activity where project_id = ? and type = 'insight.created'`, [id])).to.equal(CAP);

    const racing = await project(owner.token);
    for (let i = 0; i < CAP - 1; i++) expect((await insight(racing.namespace, `n${i}`)).status).to.equal(201);
    const answers = await burst(30, (i) => insight(racing.namespace, `racer ${i}`));
    expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 29 });
    expect(await rows('select count(*)::int as n from insights where project_id = ?', [racing.id])).to.equal(CAP);
  });

  it('members plus invites: the invite past 3 is refused, accepting at the cap works; 30 concurrent invites at 2 leave 3', async () => {
    const owner = await account();
    const { id, namespace } = await project(owner.token);
    const invitee = await account();
    const [second, third] = await bareUsers(2);
    for (const username of [invitee.username, second]) {
      expect((await on('POST', projectPath(namespace, '/invites'), owner.token, { username })).status).to.equal(201);
    }
    expectLimit(
      await on('POST', projectPath(namespace, '/invites'), owner.token, { username: third }),
      'This project has 3 members and pending invites',
      'MAX_MEMBERS_PER_PROJECT',
      CAP,
    );
    expect(await rows('select count(*)::int as n from project_invites where project_id = ?', [id])).to.equal(2);
    expect(await rows(`select count(*)::int as n from activity where project_id = ? and type = 'invite.created'`, [id])).to.equal(2);
    // An invite turns into a membership: the count stays at the cap, and accepting is not refused.
    expect((await on('PUT', projectPath(namespace, `/invites/${invitee.username}`), invitee.token)).status).to.equal(200);
    expect(await rows('select count(*)::int as n from project_members where project_id = ?', [id])).to.equal(2);
    expect((await on('POST', projectPath(namespace, '/invites'), owner.token, { username: third })).status).to.equal(409);

    const racing = await project(owner.token);
    const users = await bareUsers(31);
    expect((await on('POST', projectPath(racing.namespace, '/invites'), owner.token, { username: users[30] })).status).to.equal(201);
    const answers = await burst(30, (i) => on('POST', projectPath(racing.namespace, '/invites'), owner.token, { username: users[i] }));
    expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 29 });
    expect(await rows('select count(*)::int as n from project_invites where project_id = ?', [racing.id])).to.equal(CAP - 1);
  });

  it('projects a user owns: the 4th is refused, being a member elsewhere does not count; 30 concurrent creates at 2 leave 3', async () => {
    const user = await account();
    const other = await account();
    const elsewhere = await project(other.token);
    expect((await on('POST', projectPath(elsewhere.namespace, '/invites'), other.token, { username: user.username })).status).to.equal(201);
    expect((await on('PUT', projectPath(elsewhere.namespace, `/invites/${user.username}`), user.token)).status).to.equal(200);
    for (let i = 0; i < CAP; i++) await project(user.token);
    const namespace = namespaceName('over');
    const refused = await on('POST', '/v1/projects', user.token, { name: 'Over', namespace });
    expectLimit(refused, 'You own 3 projects', 'MAX_PROJECTS_PER_USER', CAP);
    expect(await rows('select count(*)::int as n from projects where namespace = ?', [namespace])).to.equal(0);
    expect(await rows(`select count(*)::int as n from project_members where user_id = ? and role = 'owner'`, [user.id])).to.equal(CAP);

    const racer = await account();
    for (let i = 0; i < CAP - 1; i++) await project(racer.token);
    const answers = await burst(30, () => on('POST', '/v1/projects', racer.token, { name: 'Racing', namespace: namespaceName('race') }));
    expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 29 });
    for (const answer of answers.filter((a) => a.status === 409)) expectLimit(answer, 'You own 3 projects', 'MAX_PROJECTS_PER_USER', CAP);
    expect(await rows(`select count(*)::int as n from project_members where user_id = ? and role = 'owner'`, [racer.id])).to.equal(CAP);
  });

  it('API tokens: the 4th is refused; 30 concurrent creates at 2 leave 3; revoking one makes room', async () => {
    const user = await account();
    for (let i = 0; i < CAP; i++) secret(expectData(await on('POST', '/v1/auth/tokens', user.token, { name: `t${i}` }), 201).token);
    expectLimit(await on('POST', '/v1/auth/tokens', user.token, { name: 'over' }), 'You have 3 API tokens', 'MAX_API_TOKENS_PER_USER', CAP);
    expect(await rows('select count(*)::int as n from api_tokens where user_id = ?', [user.id])).to.equal(CAP);
    const [first] = await db<{ id: string }>('select id from api_tokens where user_id = ? order by id limit 1', [user.id]);
    expect((await on('DELETE', `/v1/auth/tokens/${first!.id}`, user.token)).status).to.equal(204);
    secret(expectData(await on('POST', '/v1/auth/tokens', user.token, { name: 'room' }), 201).token);

    const racer = await account();
    for (let i = 0; i < CAP - 1; i++) secret(expectData(await on('POST', '/v1/auth/tokens', racer.token, { name: `t${i}` }), 201).token);
    const answers = await burst(30, (i) => on('POST', '/v1/auth/tokens', racer.token, { name: `racer ${i}` }));
    for (const answer of answers.filter((a) => a.status === 201)) secret(answer.json.data.token as string);
    expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 29 });
    expect(await rows('select count(*)::int as n from api_tokens where user_id = ?', [racer.id])).to.equal(CAP);
  });
});

describe('answer sizes at the default caps', function () {
  this.timeout(600_000);
  /** The most bytes a text field can take in JSON per character: a control character is sent as `\u0001`. */
  const widest = (n: number) => '\u0001'.repeat(n);
  const iconKey = (i: number) => i.toString(16).padStart(64, 'a');
  /** A uuid[] literal: the test's SQL helper would spread an array into a list. */
  const uuids = (ids: string[]) => `{${ids.join(',')}}`;
  let owner: TestUser;
  let big: { id: string; namespace: string };
  const projects: { id: string; namespace: string }[] = [];

  before(async () => {
    owner = await signUp();
    // As many projects as a user may own (MAX_PROJECTS_PER_USER, 100), through the API.
    for (let i = 0; i < 100; i++) {
      projects.push(await createProject(owner.token, { name: `${widest(99)}${i % 10}`, namespace: namespaceName('big') }));
    }
    const refused = await call('POST', '/v1/projects', owner.token, { name: 'One more', namespace: namespaceName('over') });
    expectLimit(refused, 'You own 100 projects', 'MAX_PROJECTS_PER_USER', 100);
    big = projects[0]!;
    // Every project at the feed cap (100), every feed at its widest; straight into the database.
    const ids = uuids(projects.map((p) => p.id));
    await sql(`update feeds set description = ?, emoji = ? where project_id = any(?::uuid[])`, [widest(500), widest(32), ids]);
    await sql(
      `insert into feeds (id, project_id, name, description, emoji, type, created_at)
       select gen_random_uuid(), p.id, left('feed-' || i || '-' || repeat('x', 40), 40), ?, ?, 0, now() + i * interval '1 millisecond'
       from unnest(?::uuid[]) as p(id), generate_series(1, 99) as i`,
      [widest(500), widest(32), ids],
    );
    // The first at the member cap (MAX_MEMBERS_PER_PROJECT, 1,000 with the owner), every member with the longest username and an icon.
    const prefix = uniqueName('m');
    await sql(
      `insert into users (id, username, email, password_hash, icon, created_at, updated_at)
       select gen_random_uuid(), 'u' || left(md5(? || i), 31), md5(? || i) || '@example.com', 'x', ?, now(), now()
       from generate_series(1, 999) as i`,
      [prefix, prefix, iconKey(1)],
    );
    await sql(
      `insert into project_members (id, project_id, user_id, role, created_at)
       select gen_random_uuid(), ?, u.id, 'member', now()
       from generate_series(1, 999) as i join users u on u.username = 'u' || left(md5(? || i), 31)`,
      [big.id, prefix],
    );
    await sql('update users set icon = ? where id = ?', [iconKey(2), owner.id]);
  });

  it('a project at every cap, every field at its widest, answers under 1 MiB', async () => {
    const answer = await call('GET', projectPath(big.namespace), owner.token);
    const project = expectData(answer);
    expect(project.members).to.have.length(1000);
    expect(project.feeds).to.have.length(100);
    const bytes = Buffer.byteLength(answer.text);
    console.log(`      GET one project (1,000 members, 100 feeds, widest fields): ${bytes} bytes (${(bytes / MiB).toFixed(3)} MiB)`);
    expect(bytes).to.be.below(MiB);
  });

  it('the project list with 100 such projects: every page under 1 MiB, all of them reached through next_cursor', async () => {
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const answer: Answer = await call('GET', `/v1/projects?limit=100${cursor ? `&cursor=${cursor}` : ''}`, owner.token);
      const page = expectData(answer);
      sizes.push(Buffer.byteLength(answer.text));
      expect(page.items.length).to.be.within(1, 100);
      seen.push(...page.items.map((p: { id: string }) => p.id));
      cursor = page.next_cursor;
    } while (cursor !== null && sizes.length < 200);
    const largest = Math.max(...sizes);
    console.log(`      GET /v1/projects?limit=100, 100 projects × 100 widest feeds: ${sizes.length} pages, largest ${largest} bytes`);
    expect(largest).to.be.below(MiB);
    expect(seen).to.deep.equal(projects.map((p) => p.id).reverse());
  });

  it('keeps the heap bounded under 8 parallel reads of that list (each read loads about one page, not 100 projects)', async () => {
    const before = process.memoryUsage().heapUsed;
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 2);
    const answers = await Promise.all(Array.from({ length: 8 }, () => call('GET', '/v1/projects?limit=100', owner.token)));
    clearInterval(sampler);
    for (const answer of answers) expect(Buffer.byteLength(answer.text)).to.be.below(MiB);
    const mib = (bytes: number) => (bytes / MiB).toFixed(1);
    console.log(`      8 parallel GET /v1/projects?limit=100: heap ${mib(before)} MiB before, peak +${mib(peak - before)} MiB`);
    expect(peak - before).to.be.below(64 * MiB);
  });

  it('refuses the 101st insight of a project (MAX_INSIGHTS_PER_PROJECT, 100)', async () => {
    const target = projects[1]!;
    for (let i = 0; i < 100; i++) await createInsight(owner.token, target.namespace, { title: `Insight ${i}`, value: i });
    const refused = await call('POST', projectPath(target.namespace, '/insights'), owner.token, { title: 'One more', value: 1 });
    expectLimit(refused, 'This project has 100 insights', 'MAX_INSIGHTS_PER_PROJECT', 100);
    expect(await count('select count(*)::int as n from insights where project_id = ?', [target.id])).to.equal(100);
  });

  it('refuses the 51st API token of a user (MAX_API_TOKENS_PER_USER, 50)', async () => {
    const user = await signUp();
    for (let i = 0; i < 50; i++) secret(expectData(await call('POST', '/v1/auth/tokens', user.token, { name: `t${i}` }), 201).token);
    const refused = await call('POST', '/v1/auth/tokens', user.token, { name: 'One more' });
    expectLimit(refused, 'You have 50 API tokens', 'MAX_API_TOKENS_PER_USER', 50);
  });

  it('an events page of 100 of the widest events stays under 1 MiB, and the cursor reaches them all', async () => {
    const target = projects[2]!;
    const [feed] = await sql<{ id: string }>(`select id from feeds where project_id = ? and name = 'general'`, [target.id]);
    const tags = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`${'k'.repeat(30)}${String(i).padStart(2, '0')}`, widest(200)]));
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const id = v7();
      ids.push(id);
      await sql(
        `insert into events (id, project_id, feed_id, event, description, emoji, tags, timestamp, created_at)
         values (?, ?, ?, ?, ?, ?, ?, now(), now())`,
        [id, target.id, feed!.id, widest(200), widest(4000), widest(32), JSON.stringify(tags)],
      );
    }
    const sizes: number[] = [];
    const counts: number[] = [];
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query = `?limit=100${cursor ? `&cursor=${cursor}` : ''}`;
      const answer: Answer = await call('GET', projectPath(target.namespace, `/events${query}`), owner.token);
      const page = expectData(answer);
      sizes.push(Buffer.byteLength(answer.text));
      counts.push(page.items.length);
      seen.push(...page.items.map((e: { id: string }) => e.id));
      cursor = page.next_cursor;
    } while (cursor !== null && sizes.length < 200);
    console.log(`      GET …/events?limit=100 of 100 widest events: pages of ${counts.join(', ')} events, ${sizes.join(', ')} bytes`);
    expect(Math.max(...sizes)).to.be.below(MiB);
    expect(seen).to.deep.equal(ids.reverse());
  });
});
