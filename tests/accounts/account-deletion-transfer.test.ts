/**
 * Leaving and handing over: `DELETE /v1/users/me` (an account deleted with the projects it owns
 * alone, refused while it owns a project others are members of) and
 * `PUT /v1/projects/{namespace}/owner` (a project handed over to another member). Every refusal is
 * checked to change nothing in the database; every success for what it removed and what it kept.
 * The Stripe cases run on a server of their own whose Stripe settings point at the stand-in.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { RunningServer } from '../../server/src/server.js';
import { baseUrl, count, secret, sql, startExtraServer, startRateLimitedServer } from '../support/harness.js';
import { apiToken, signUp, signUpOn, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError, expectInvalid, expectNoContent, type Answer } from '../support/http.js';
import { activityRows, addMember, createInsight, createProject, invite, member, projectPath, rowsOfProject } from '../support/projects.js';
import { StripeStandIn } from '../support/stripe-stand-in.js';
import { Signalboard, SignalboardApiError } from '../../sdk/src/index.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const deleteMe = (user: { token: string }, password: string) => call('DELETE', '/v1/users/me', user.token, { password });
const transfer = (token: string, namespace: string, username: string) => call('PUT', projectPath(namespace, '/owner'), token, { username });

/** What the database holds of a user: its row and everything that hangs off it. */
async function userFootprint(userId: string, db?: RunningServer['db']): Promise<Record<string, number>> {
  const n = (table: string, column = 'user_id') => count(`select count(*)::int from ${table} where ${column} = ?`, [userId], db);
  return {
    users: await n('users', 'id'),
    sessions: await n('sessions'),
    api_tokens: await n('api_tokens'),
    project_members: await n('project_members'),
    project_invites: await n('project_invites'),
    invites_sent: await n('project_invites', 'invited_by_id'),
    activity: await n('activity', 'actor_id'),
  };
}

async function roles(projectId: string): Promise<Record<string, string>> {
  const rows = await sql<{ username: string; role: string }>(
    'select u.username, m.role from project_members m join users u on u.id = m.user_id where m.project_id = ? order by u.username',
    [projectId],
  );
  return Object.fromEntries(rows.map((row) => [row.username, row.role]));
}

/** A project of `owner` with a second member, an insight, an event and a pending invite: something to keep whole. */
async function sharedProject(owner: TestUser, mate: TestUser): Promise<any> {
  const project = await createProject(owner.token);
  await addMember(owner.token, project.namespace, mate);
  await createInsight(owner.token, project.namespace, { title: 'Signups', value: 1 });
  expectData(await call('POST', projectPath(project.namespace, '/feeds/general/events'), owner.token, { event: 'Signed up' }), 201);
  await invite(owner.token, project.namespace, (await signUp()).username);
  return project;
}

function expectOwnsProjects(answer: Answer, details: { path: string; message: string }[]): void {
  expect(answer.status, answer.text).to.equal(409);
  expect(answer.json.success).to.equal(false);
  expect(answer.json.error.code).to.equal('owns_projects');
  expect(answer.json.error.message)
    .to.be.a('string')
    .and.match(/transfer/);
  expect(answer.json.error.details).to.deep.equal(details);
}

describe('DELETE /v1/users/me', () => {
  it('a wrong password: 401 invalid_credentials, and nothing changes', async () => {
    const user = await signUp();
    const project = await createProject(user.token);
    const before = { user: await userFootprint(user.id), project: await rowsOfProject(project.id) };
    expectError(await deleteMe(user, `${user.password}-wrong`), 401, 'invalid_credentials');
    expectError(await deleteMe(user, 'x'.repeat(100)), 401, 'invalid_credentials', 'longer than bcrypt reads');
    expect({ user: await userFootprint(user.id), project: await rowsOfProject(project.id) }).to.deep.equal(before);
    expectData(await call('GET', '/v1/users/me', user.token));
  });

  it('password guesses count against the sign-in limit of the client address: 429, and the account stays', async function () {
    this.timeout(120_000);
    const server = await startRateLimitedServer({ AUTH_RATE_LIMIT: '3', ...CLOSES_AT_ONCE });
    try {
      const user = await signUpOn(server); // the first point of this address
      const guess = () => callAt(server.url, 'DELETE', '/v1/users/me', user.token, { password: 'a wrong guess' });
      expectError(await guess(), 401, 'invalid_credentials');
      expectError(await guess(), 401, 'invalid_credentials');
      expectError(await guess(), 429, 'rate_limited');
      // The right password is refused too until the minute is over: the limit counts attempts.
      expectError(await callAt(server.url, 'DELETE', '/v1/users/me', user.token, { password: user.password }), 429, 'rate_limited');
      expect(await count('select count(*)::int from users where id = ?', [user.id], server.db)).to.equal(1);
    } finally {
      await server.close();
    }
  });

  it('an API token: 403 session_required; a missing or extra field: 400; nothing changes', async () => {
    const user = await signUp();
    const token = await apiToken(user.token);
    const before = await userFootprint(user.id);
    expectError(await call('DELETE', '/v1/users/me', token, { password: user.password }), 403, 'session_required');
    expectInvalid(await call('DELETE', '/v1/users/me', user.token, {}), '/body/password');
    expectInvalid(await call('DELETE', '/v1/users/me', user.token, { password: user.password, also: 1 }), '/body/also');
    expectError(await call('DELETE', '/v1/users/me'), 401, 'unauthenticated');
    expect(await userFootprint(user.id)).to.deep.equal(before);
  });

  it('owning a project with other members: 409 owns_projects naming it, and nothing is deleted', async () => {
    const owner = await signUp();
    const mate = await signUp();
    const shared = await sharedProject(owner, mate);
    const solo = await createProject(owner.token);
    const before = { user: await userFootprint(owner.id), shared: await rowsOfProject(shared.id), solo: await rowsOfProject(solo.id) };
    expectOwnsProjects(await deleteMe(owner, owner.password), [{ path: `/projects/${shared.namespace}`, message: 'has 1 other member' }]);
    expect({
      user: await userFootprint(owner.id),
      shared: await rowsOfProject(shared.id),
      solo: await rowsOfProject(solo.id),
    }).to.deep.equal(before);
    // Pending invites are not members: a project with only those is the owner's alone.
    expect(before.shared.project_invites).to.equal(1);
    expectData(await call('GET', '/v1/users/me', owner.token));
  });

  it('owning more shared projects than the details hold: the message counts them all, the details name 20', async function () {
    this.timeout(120_000);
    const owner = await signUp();
    const mate = await signUp();
    const namespaces: string[] = [];
    for (let i = 0; i < 21; i++) {
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, mate);
      namespaces.push(project.namespace);
    }
    const answer = await deleteMe(owner, owner.password);
    expect(answer.status, answer.text).to.equal(409);
    expect(answer.json.error.code).to.equal('owns_projects');
    expect(answer.json.error.message).to.match(/^You own 21 projects with other members/);
    expect(answer.json.error.details).to.have.length(20);
    for (const detail of answer.json.error.details) {
      expect(namespaces).to.include(detail.path.replace('/projects/', ''));
      expect(detail.message).to.equal('has 1 other member');
    }
    expect((await userFootprint(owner.id)).project_members).to.equal(21);
  });

  it('deletes the account with what hangs off it; activity it wrote stays with actor null; the name is free again', async () => {
    const user = await signUp();
    const other = await signUp();
    const session2 = expectData(
      await call('POST', '/v1/auth/login', undefined, { login: user.username, password: user.password }),
      201,
    ).token;
    const token = await apiToken(user.token);

    // A project of its own, with feeds, events, an insight and a pending invite: deleted with it.
    const solo = await createProject(user.token);
    await createInsight(user.token, solo.namespace, { title: 'Revenue', value: 10 });
    expectData(await call('POST', projectPath(solo.namespace, '/feeds'), user.token, { name: 'deploys' }), 201);
    expectData(await call('POST', projectPath(solo.namespace, '/feeds/deploys/events'), token, { event: 'Deployed' }), 201);
    await invite(user.token, solo.namespace, other.username);
    // Another's project it is a member of and wrote to: it leaves, its records stay without an actor.
    const theirs = await createProject(other.token);
    await addMember(other.token, theirs.namespace, user);
    await createInsight(user.token, theirs.namespace, { title: 'Made by the leaver', value: 1 });
    // An invite it received, and one it sent in a project it has since handed over.
    const invitedTo = await createProject(other.token);
    await invite(other.token, invitedTo.namespace, user.username);
    const handed = await createProject(user.token);
    await addMember(user.token, handed.namespace, other);
    const guest = await signUp();
    await invite(user.token, handed.namespace, guest.username);
    expectData(await transfer(user.token, handed.namespace, other.username));

    const written = (await activityRows(theirs.id)).filter((row) => row.actor_id === user.id).length;
    expect(written).to.be.greaterThan(0);

    expectNoContent(await deleteMe(user, user.password));

    expect(await userFootprint(user.id)).to.deep.equal({
      users: 0,
      sessions: 0,
      api_tokens: 0,
      project_members: 0,
      project_invites: 0,
      invites_sent: 0,
      activity: 0,
    });
    const gone = await rowsOfProject(solo.id);
    expect(gone).to.deep.equal(Object.fromEntries(Object.keys(gone).map((table) => [table, 0])));
    for (const credential of [user.token, session2, token]) {
      expectError(await call('GET', '/v1/users/me', credential), 401, 'unauthenticated');
    }

    // Its records in the project that survives are there, by no one; the API shows actor null.
    const survivors = await activityRows(theirs.id);
    expect(survivors.filter((row) => row.actor_id === null).length).to.equal(written + 1);
    const [left] = survivors;
    expect(left).to.deep.include({ type: 'member.left', actor_id: null, data: { username: user.username } });
    const log = expectData(await call('GET', projectPath(theirs.namespace, '/activity?limit=100'), other.token));
    const byLeaver = log.items.filter((item: any) => item.type === 'insight.created' && item.data.title === 'Made by the leaver');
    expect(byLeaver).to.have.length(1);
    expect(byLeaver[0].actor).to.equal(null);
    expect(await roles(theirs.id)).to.deep.equal({ [other.username]: 'owner' });

    // The invites: received one declined, sent one revoked, each recorded in its project.
    expect(await count('select count(*)::int from project_invites where project_id in (?, ?)', [invitedTo.id, handed.id])).to.equal(0);
    expect((await activityRows(invitedTo.id))[0]).to.deep.include({
      type: 'invite.declined',
      actor_id: null,
      data: { username: user.username },
    });
    expect((await activityRows(handed.id))[0]).to.deep.include({
      type: 'invite.revoked',
      actor_id: null,
      data: { username: guest.username },
    });
    expect(await roles(handed.id)).to.deep.equal({ [other.username]: 'owner' });

    // The username and the address can be signed up with again, by anyone.
    const again = await signUp({ username: user.username, email: user.email.toUpperCase() });
    expect(again.id).to.not.equal(user.id);
    // A new account under the old name inherits nothing of the old one.
    expectError(await call('GET', projectPath(theirs.namespace), again.token), 404, 'not_found');
  });

  it('racing its own accept of an invite: the membership is either never made (401 or 404) or given up with member.left', async function () {
    this.timeout(120_000);
    for (let i = 0; i < 4; i++) {
      const owner = await signUp();
      const leaver = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, leaver.username);
      const [deleted, accepted] = await Promise.all([
        deleteMe(leaver, leaver.password),
        call('PUT', projectPath(project.namespace, `/invites/${leaver.username}`), leaver.token),
      ]);
      expectNoContent(deleted);
      const types = (await activityRows(project.id)).map((row) => row.type);
      if (accepted.status === 200) expect(types.slice(0, 2)).to.deep.equal(['member.left', 'member.joined']);
      else {
        // Refused at the credential or the lock (401), or, deleted in between, finding no invite (404).
        if (accepted.status === 404) expectError(accepted, 404, 'not_found');
        else expectError(accepted, 401, 'unauthenticated');
        expect(types[0]).to.equal('invite.declined');
      }
      expect(await roles(project.id)).to.deep.equal({ [owner.username]: 'owner' });
      expect(await count('select count(*)::int from project_invites where project_id = ?', [project.id])).to.equal(0);
    }
  });

  it('through the SDK: users.deleteMe sends the password, projects.transferOwnership hands over', async () => {
    const user = await signUp();
    const mate = await signUp();
    const sb = new Signalboard({ baseUrl: baseUrl(), token: user.token });
    const project = await sb.projects.create({ name: 'Via the SDK', namespace: `sdk-${randomBytes(4).toString('hex')}` });
    await addMember(user.token, project.namespace, mate);
    const handed = await sb.projects.transferOwnership(project.namespace, { username: mate.username });
    expect(handed.members.map((m) => m.role)).to.deep.equal(['owner', 'member']);
    const refused = await sb.users.deleteMe({ password: `${user.password}-wrong` }).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(SignalboardApiError);
    expect((refused as SignalboardApiError).code).to.equal('invalid_credentials');
    await sb.users.deleteMe({ password: user.password });
    expect((await userFootprint(user.id)).users).to.equal(0);
  });

  it('racing an invitee accepting into its solo project: either 409 and a member, or deleted and the accept 404', async function () {
    this.timeout(120_000);
    const outcomes = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const owner = await signUp();
      const joiner = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, joiner.username);
      const [deleted, accepted] = await Promise.all([
        deleteMe(owner, owner.password),
        call('PUT', projectPath(project.namespace, `/invites/${joiner.username}`), joiner.token),
      ]);
      if (deleted.status === 204) {
        expectError(accepted, 404, 'not_found');
        expect(await rowsOfProject(project.id)).to.deep.include({ projects: 0, project_members: 0 });
        expect((await userFootprint(owner.id)).users).to.equal(0);
      } else {
        expectOwnsProjects(deleted, [{ path: `/projects/${project.namespace}`, message: 'has 1 other member' }]);
        expect(accepted.status, accepted.text).to.equal(200);
        expect(await roles(project.id)).to.deep.equal({ [owner.username]: 'owner', [joiner.username]: 'member' });
      }
      outcomes.add(String(deleted.status));
    }
    expect([...outcomes].every((status) => status === '204' || status === '409')).to.equal(true);
  });
});

describe('PUT /v1/projects/{namespace}/owner', () => {
  let owner: TestUser;
  let mate: TestUser;
  before(async () => {
    owner = await signUp();
    mate = await signUp();
  });

  it('hands the project over: 200, the old owner a member, project.owner_changed; the new owner can delete it', async () => {
    const project = await sharedProject(owner, mate);
    const answer = expectData(await transfer(owner.token, project.namespace, mate.username.toUpperCase()));
    expect(answer.id).to.equal(project.id);
    expect(answer.members).to.deep.equal([member(mate, 'owner'), member(owner, 'member')]);
    expect(await roles(project.id)).to.deep.equal({ [owner.username]: 'member', [mate.username]: 'owner' });
    expect((await activityRows(project.id))[0]).to.deep.include({
      type: 'project.owner_changed',
      actor_id: owner.id,
      data: { from: owner.username, to: mate.username },
    });
    const log = expectData(await call('GET', projectPath(project.namespace, '/activity?limit=1'), owner.token));
    expect(log.items[0]).to.deep.include({ type: 'project.owner_changed', data: { from: owner.username, to: mate.username } });

    // The old owner is an ordinary member now; the new one has the owner's actions.
    expectError(await call('PATCH', projectPath(project.namespace), owner.token, { name: 'Mine again' }), 403, 'not_owner');
    expectError(await transfer(owner.token, project.namespace, owner.username), 403, 'not_owner');
    expectNoContent(await call('DELETE', projectPath(project.namespace), mate.token));
    expect((await rowsOfProject(project.id)).projects).to.equal(0);
  });

  it('to a non-member, an unknown user or a pending invitee: 404 not_found, and nothing changes', async () => {
    const project = await createProject(owner.token);
    const outsider = await signUp();
    const invitee = await signUp();
    await invite(owner.token, project.namespace, invitee.username);
    const before = await rowsOfProject(project.id);
    for (const username of [outsider.username, 'no_such_user_here', invitee.username]) {
      expectError(await transfer(owner.token, project.namespace, username), 404, 'not_found', username);
    }
    expectInvalid(await transfer(owner.token, project.namespace, 'Not A Username!'), '/body/username');
    expect(await rowsOfProject(project.id)).to.deep.equal(before);
    expect(await roles(project.id)).to.deep.equal({ [owner.username]: 'owner' });
  });

  it('a member: 403 not_owner; an API token: 403 session_required; an outsider: 404; nothing changes', async () => {
    const project = await sharedProject(owner, mate);
    const token = await apiToken(owner.token);
    const before = await rowsOfProject(project.id);
    expectError(await transfer(mate.token, project.namespace, mate.username), 403, 'not_owner');
    expectError(await transfer(token, project.namespace, mate.username), 403, 'session_required');
    expectError(await transfer((await signUp()).token, project.namespace, mate.username), 404, 'not_found');
    expect(await rowsOfProject(project.id)).to.deep.equal(before);
    expect(await roles(project.id)).to.deep.equal({ [owner.username]: 'owner', [mate.username]: 'member' });
  });

  it('to oneself: 200 with the project as it is, and no activity', async () => {
    const project = await createProject(owner.token);
    const before = await rowsOfProject(project.id);
    const answer = expectData(await transfer(owner.token, project.namespace, owner.username));
    expect(answer.members).to.deep.equal([member(owner, 'owner')]);
    expect(await rowsOfProject(project.id)).to.deep.equal(before);
  });

  it('two transfers at once: one 200, the other 403; the project has exactly one owner, the winner’s heir', async () => {
    for (let i = 0; i < 4; i++) {
      const first = await signUp();
      const second = await signUp();
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, first);
      await addMember(owner.token, project.namespace, second);
      const answers = await Promise.all([first, second].map((heir) => transfer(owner.token, project.namespace, heir.username)));
      expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 403]);
      const winner = answers[0]!.status === 200 ? first : second;
      expectError(
        answers.find((a) => a.status === 403)!,
        403,
        'not_owner',
      );
      expect(await roles(project.id)).to.deep.equal(
        Object.fromEntries(
          [
            [owner.username, 'member'],
            [first.username, first === winner ? 'owner' : 'member'],
            [second.username, second === winner ? 'owner' : 'member'],
          ].sort(([a], [b]) => a!.localeCompare(b!)),
        ),
      );
      expect(
        await count(`select count(*)::int from activity where project_id = ? and type = 'project.owner_changed'`, [project.id]),
      ).to.equal(1);
    }
  });

  it('after handing over its shared project the old owner can delete its account, leaving the project', async () => {
    const leaver = await signUp();
    const project = await sharedProject(leaver, mate);
    expectOwnsProjects(await deleteMe(leaver, leaver.password), [
      { path: `/projects/${project.namespace}`, message: 'has 1 other member' },
    ]);
    expectData(await transfer(leaver.token, project.namespace, mate.username));
    expectNoContent(await deleteMe(leaver, leaver.password));
    expect(await roles(project.id)).to.deep.equal({ [mate.username]: 'owner' });
    expect(await activityRows(project.id).then((rows) => rows.filter((row) => row.actor_id === leaver.id))).to.deep.equal([]);
  });
});

describe('on a server of its own: Stripe stand-in, and at most 2 projects per user', function () {
  this.timeout(60_000);
  const apiKey = secret(`sk_test_${randomBytes(12).toString('hex')}`);
  let standIn: StripeStandIn;
  let server: RunningServer;

  before(async function () {
    this.timeout(120_000);
    standIn = await StripeStandIn.start(apiKey);
    server = await startExtraServer({
      STRIPE_SECRET_KEY: apiKey,
      STRIPE_WEBHOOK_SECRET: secret(`whsec_${randomBytes(16).toString('hex')}`),
      STRIPE_PRICE_TIERS: 'price_basic:1',
      STRIPE_API_URL: standIn.url,
      // A subscriber owns two projects: at the cap, so a project handed to it is refused.
      MAX_PROJECTS_PER_USER: '2',
      ...CLOSES_AT_ONCE,
    });
  });

  after(async () => {
    await server?.close();
    await standIn?.close();
  });

  beforeEach(() => standIn.reset());

  /** A user owning a free project and one with a subscription (billing_id set as a completed checkout sets it). */
  async function subscriber() {
    const user = await signUpOn(server);
    const free = expectData(
      await callAt(server.url, 'POST', '/v1/projects', user.token, { name: 'Free', namespace: `free-${randomBytes(4).toString('hex')}` }),
      201,
    );
    const paid = expectData(
      await callAt(server.url, 'POST', '/v1/projects', user.token, { name: 'Paid', namespace: `paid-${randomBytes(4).toString('hex')}` }),
      201,
    );
    const subscription = `sub_${randomBytes(8).toString('hex')}`;
    await sql('update projects set billing_id = ?, tier = 1 where id = ?', [subscription, paid.id], server.db);
    return { user, free, paid, subscription };
  }

  const footprint = async (s: Awaited<ReturnType<typeof subscriber>>) => ({
    user: await userFootprint(s.user.id, server.db),
    free: await rowsOfProject(s.free.id, server.db),
    paid: await rowsOfProject(s.paid.id, server.db),
  });

  it('cancels the subscription first, then deletes the account and both projects', async () => {
    const s = await subscriber();
    expectNoContent(await callAt(server.url, 'DELETE', '/v1/users/me', s.user.token, { password: s.user.password }));
    expect(standIn.calls.map((c) => `${c.method} ${c.path}`)).to.deep.equal([`DELETE /v1/subscriptions/${s.subscription}`]);
    const after = await footprint(s);
    expect(after.user.users).to.equal(0);
    expect(after.free).to.deep.equal(Object.fromEntries(Object.keys(after.free).map((table) => [table, 0])));
    expect(after.paid).to.deep.equal(Object.fromEntries(Object.keys(after.paid).map((table) => [table, 0])));
  });

  it('Stripe failing: 502 billing_unavailable, as for a project delete, and nothing is deleted', async () => {
    const s = await subscriber();
    const before = await footprint(s);
    standIn.mode = 'fail';
    expectError(
      await callAt(server.url, 'DELETE', '/v1/users/me', s.user.token, { password: s.user.password }),
      502,
      'billing_unavailable',
    );
    expect(await footprint(s)).to.deep.equal(before);
    expect(before.user.users).to.equal(1);
    expect(before.paid.projects).to.equal(1);
    expectData(await callAt(server.url, 'GET', '/v1/users/me', s.user.token));
  });

  it('handing a project to a member who owns as many projects as the cap allows: 409 limit_reached, nothing changes', async () => {
    const s = await subscriber();
    const owner = await signUpOn(server);
    const project = expectData(
      await callAt(server.url, 'POST', '/v1/projects', owner.token, {
        name: 'Handed',
        namespace: `hand-${randomBytes(4).toString('hex')}`,
      }),
      201,
    );
    expectData(
      await callAt(server.url, 'POST', projectPath(project.namespace, '/invites'), owner.token, { username: s.user.username }),
      201,
    );
    expectData(await callAt(server.url, 'PUT', projectPath(project.namespace, `/invites/${s.user.username}`), s.user.token));
    const before = await rowsOfProject(project.id, server.db);
    const answer = await callAt(server.url, 'PUT', projectPath(project.namespace, '/owner'), owner.token, { username: s.user.username });
    expect(answer.status, answer.text).to.equal(409);
    expect(answer.json.error.code).to.equal('limit_reached');
    expect(answer.json.error.details).to.deep.equal([{ path: '/limits/MAX_PROJECTS_PER_USER', message: 'at most 2' }]);
    expect(await rowsOfProject(project.id, server.db)).to.deep.equal(before);
  });
});
