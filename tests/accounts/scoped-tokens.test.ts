/**
 * API tokens narrowed when they are made: `projects` (the only projects they reach: any other is 404,
 * as to a non-member) and `scopes` (the operations they may call, by each operation's `x-scope`: any
 * other is 403 `insufficient_scope`). Every refusal is checked to leave the database as it was;
 * tokens made with neither reach every project with scope all; the list shows what each token reaches; a renamed
 * project keeps its tokens; and publishing, the one thing a publish-only token in a web page does,
 * answers CORS to the allowed origins while nothing else does.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { count, secret, sql, startExtraServer, type TestServer } from '../support/harness.js';
import { signUp, signUpOn, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError, expectInvalid, send, type Answer } from '../support/http.js';
import { addMember, createInsight, createProject, namespaceName, projectPath } from '../support/projects.js';

interface Token {
  id: string;
  name: string;
  token: string;
  created_at: string;
  expires_at: string | null;
  projects: string[] | null;
  scopes: string[];
}

interface Project {
  id: string;
  namespace: string;
}

/** A new API token of the session's user, made with this body (201 asserted), on the run's server or at `origin`. */
async function mint(session: string, body: Record<string, unknown>, origin?: string): Promise<Token> {
  const answer = origin
    ? await callAt(origin, 'POST', '/v1/auth/tokens', session, body)
    : await call('POST', '/v1/auth/tokens', session, body);
  const data = expectData(answer, 201, 'create API token') as Token;
  secret(data.token);
  return data;
}

/** Rows of every table of the service: what a refused request must leave as it found. */
async function everyRowCount(): Promise<Record<string, number>> {
  const tables = await sql<{ table_name: string }>(
    `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by table_name`,
  );
  const counts: Record<string, number> = {};
  for (const { table_name: table } of tables) counts[table] = await count(`select count(*)::int from "${table}"`);
  return counts;
}

/** The project's own row and its feeds and insights, as stored. */
async function projectState(projectId: string): Promise<unknown> {
  return {
    project: await sql('select namespace, name, icon, tier, updated_at from projects where id = ?', [projectId]),
    feeds: await sql('select id, name, description, emoji from feeds where project_id = ? order by id', [projectId]),
    insights: await sql('select id, title, value, updated_at from insights where project_id = ? order by id', [projectId]),
  };
}

/** What the database holds of a token: its scopes and limit, and the ids of its projects. */
async function tokenRow(tokenId: string): Promise<{ scopes: string; limited: boolean; projectIds: string[] }> {
  const [row] = await sql<{ scopes: string; limited_to_projects: boolean }>(
    `select array_to_string(scopes, ',') as scopes, limited_to_projects from api_tokens where id = ?`,
    [tokenId],
  );
  const projects = await sql<{ project_id: string }>('select project_id from api_token_projects where token_id = ? order by project_id', [
    tokenId,
  ]);
  return { scopes: row!.scopes, limited: row!.limited_to_projects, projectIds: projects.map((p) => p.project_id) };
}

function listTokens(session: string): Promise<Answer> {
  return call('GET', '/v1/auth/tokens?limit=100', session);
}

async function listed(session: string, tokenId: string): Promise<Record<string, unknown>> {
  const items = expectData(await listTokens(session)).items as { id: string }[];
  const item = items.find((i) => i.id === tokenId);
  expect(item, `token ${tokenId} is listed`).to.not.equal(undefined);
  return item as Record<string, unknown>;
}

const key = () => ({ 'Idempotency-Key': randomUUID() });

describe('scoped API tokens', () => {
  let owner: TestUser;
  let stranger: TestUser;
  let a: Project;
  let b: Project;
  /** The stranger's project: the owner is no member of it. */
  let foreign: Project;

  before(async () => {
    [owner, stranger] = await Promise.all([signUp(), signUp()]);
    a = await createProject(owner.token, { name: 'Project A' });
    b = await createProject(owner.token, { name: 'Project B' });
    foreign = await createProject(stranger.token, { name: 'Not yours' });
  });

  describe('made with neither projects nor scopes', () => {
    it('answer projects null and scopes ["all"], are stored with scopes {all} and no limit, and act on every project of their user, those joined later included', async () => {
      const made = await mint(owner.token, { name: 'broad' });
      expect(made).to.include({ projects: null });
      expect(made.scopes).to.deep.equal(['all']);
      expect(await tokenRow(made.id)).to.deep.equal({ scopes: 'all', limited: false, projectIds: [] });
      expect(await listed(owner.token, made.id)).to.include({ projects: null });

      expectData(await call('GET', projectPath(a.namespace), made.token));
      expectData(await call('PATCH', projectPath(b.namespace), made.token, { name: 'Project B, renamed by a broad token' }));
      expectData(await call('GET', '/v1/users/me', made.token));
      const later = await createProject(stranger.token, { name: 'Joined later' });
      expectError(await call('GET', projectPath(later.namespace), made.token), 404, 'not_found');
      await addMember(stranger.token, later.namespace, owner);
      expectData(await call('GET', projectPath(later.namespace), made.token));
      expectData(await call('POST', projectPath(later.namespace, '/feeds/general/events'), made.token, { event: 'Joined' }), 201);
      const own = await createProject(made.token, { name: 'Made by a broad token' });
      expect(own.members.map((m: { username: string }) => m.username)).to.deep.equal([owner.username]);
    });
  });

  describe('made with projects and scopes', () => {
    it('answer and list them (namespaces and scopes in order), and store the projects by id', async () => {
      const made = await mint(owner.token, { name: 'narrow', projects: [b.namespace, a.namespace], scopes: ['read', 'events:write'] });
      const namespaces = [a.namespace, b.namespace].sort();
      expect(made).to.have.all.keys('id', 'name', 'token', 'created_at', 'expires_at', 'projects', 'scopes');
      expect(made.projects).to.deep.equal(namespaces);
      expect(made.scopes).to.deep.equal(['events:write', 'read']);
      expect(await tokenRow(made.id)).to.deep.equal({ scopes: 'events:write,read', limited: true, projectIds: [a.id, b.id].sort() });
      const item = await listed(owner.token, made.id);
      expect(item).to.have.all.keys('id', 'name', 'created_at', 'expires_at', 'last_used_at', 'projects', 'scopes');
      expect(item.projects).to.deep.equal(namespaces);
      expect(item.scopes).to.deep.equal(['events:write', 'read']);
    });

    it('a publish-only token publishes, one event and a batch, to its project', async () => {
      const publisher = await mint(owner.token, { name: 'publisher', projects: [a.namespace], scopes: ['events:write'] });
      const before = await count('select count(*)::int from events where project_id = ?', [a.id]);
      expectData(await call('POST', projectPath(a.namespace, '/feeds/general/events'), publisher.token, { event: 'One' }, key()), 201);
      const batch = {
        events: [
          { feed: 'general', event: 'Two' },
          { feed: 'general', event: 'Three' },
        ],
      };
      expectData(await call('POST', projectPath(a.namespace, '/events'), publisher.token, batch, key()), 201);
      expect(await count('select count(*)::int from events where project_id = ?', [a.id])).to.equal(before + 3);
    });

    it('an insights:write token changes insights and reads nothing; a read token reads everything and writes nothing', async () => {
      const writer = await mint(owner.token, { name: 'figures', projects: [a.namespace], scopes: ['insights:write'] });
      const insight = expectData(
        await call('POST', projectPath(a.namespace, '/insights'), writer.token, { title: 'Revenue', value: 10 }),
        201,
      );
      expectData(await call('PATCH', projectPath(a.namespace, `/insights/${insight.id}`), writer.token, { increment: 5 }));
      expectError(await call('GET', projectPath(a.namespace, '/insights'), writer.token), 403, 'insufficient_scope');

      const reader = await mint(owner.token, { name: 'dashboard', scopes: ['read'] });
      for (const path of ['', '/events', '/insights', '/activity', '/feeds', '/invites']) {
        expectData(await call('GET', projectPath(a.namespace, path), reader.token), 200, `GET ${path}`);
      }
      expectData(await call('GET', '/v1/projects', reader.token));
      const before = await everyRowCount();
      expectError(
        await call('POST', projectPath(a.namespace, '/feeds/general/events'), reader.token, { event: 'No' }),
        403,
        'insufficient_scope',
      );
      expectError(
        await call('POST', projectPath(a.namespace, '/insights'), reader.token, { title: 'No', value: 1 }),
        403,
        'insufficient_scope',
      );
      expect(await everyRowCount()).to.deep.equal(before);
    });
  });

  describe('403 insufficient_scope', () => {
    it('refuses a publish-only token everything but publishing, before anything is read or done', async () => {
      const publisher = await mint(owner.token, { name: 'leaked', projects: [a.namespace], scopes: ['events:write'] });
      const insight = await createInsight(owner.token, a.namespace, { title: 'Kept', value: 1 });
      const beforeRows = await everyRowCount();
      const beforeProject = await projectState(a.id);
      const beforeUser = await sql('select username, email, icon, updated_at from users where id = ?', [owner.id]);
      const refused: [string, string, unknown?][] = [
        ['GET', projectPath(a.namespace)],
        ['GET', projectPath(a.namespace, '/events')],
        ['GET', projectPath(a.namespace, '/events/stream')],
        ['GET', projectPath(a.namespace, '/insights')],
        ['PATCH', projectPath(a.namespace), { name: 'Taken over' }],
        ['POST', projectPath(a.namespace, '/feeds'), { name: 'spam' }],
        ['DELETE', projectPath(a.namespace, '/feeds/general')],
        ['POST', projectPath(a.namespace, '/insights'), { title: 'Fake', value: 1 }],
        ['PATCH', projectPath(a.namespace, `/insights/${insight.id}`), { increment: 1000 }],
        ['DELETE', projectPath(a.namespace, `/insights/${insight.id}`)],
        ['POST', projectPath(a.namespace, '/invites'), { username: stranger.username }],
        ['DELETE', projectPath(a.namespace, `/members/${owner.username}`)],
        ['GET', '/v1/projects'],
        ['POST', '/v1/projects', { name: 'Mine now', namespace: namespaceName() }],
        ['GET', '/v1/users/me'],
        ['PATCH', '/v1/users/me', { username: 'taken-over' }],
        ['GET', '/v1/users/me/invites'],
      ];
      for (const [method, path, body] of refused) {
        const answer = await call(method, path, publisher.token, body, method === 'GET' || method === 'DELETE' ? {} : key());
        expectError(answer, 403, 'insufficient_scope', `${method} ${path}`);
      }
      // Even a body the contract would refuse: the scope is decided first.
      expectError(await call('POST', projectPath(a.namespace, '/feeds'), publisher.token, { nonsense: true }), 403, 'insufficient_scope');
      expect(await everyRowCount()).to.deep.equal(beforeRows);
      expect(await projectState(a.id)).to.deep.equal(beforeProject);
      expect(await sql('select username, email, icon, updated_at from users where id = ?', [owner.id])).to.deep.equal(beforeUser);
    });

    it('says what the operation needs and what the token has', async () => {
      const reader = await mint(owner.token, { name: 'reader', scopes: ['read'] });
      const answer = await call('POST', projectPath(a.namespace, '/feeds'), reader.token, { name: 'nope' });
      expectError(answer, 403, 'insufficient_scope');
      expect(answer.json.error.message).to.equal('This operation needs an API token with scope all; this one has read.');
    });

    it('leaves sessions alone: a session does whatever its user may', async () => {
      expectData(await call('GET', projectPath(a.namespace, '/events'), owner.token));
      expectData(await call('POST', projectPath(a.namespace, '/feeds'), owner.token, { name: namespaceName('f') }), 201);
      expectData(await call('GET', '/v1/users/me', owner.token));
    });
  });

  describe('outside its projects', () => {
    it('a limited token finds no other project: 404 exactly as a non-member gets, changing nothing', async () => {
      const limited = await mint(owner.token, { name: 'only A', projects: [a.namespace] });
      const beforeRows = await everyRowCount();
      const beforeB = await projectState(b.id);
      const requests: [string, string, unknown?][] = [
        ['GET', projectPath(b.namespace)],
        ['PATCH', projectPath(b.namespace), { name: 'Not for you' }],
        ['GET', projectPath(b.namespace, '/events')],
        ['POST', projectPath(b.namespace, '/feeds/general/events'), { event: 'Elsewhere' }],
        ['POST', projectPath(b.namespace, '/events'), { events: [{ feed: 'general', event: 'Elsewhere' }] }],
        ['POST', projectPath(b.namespace, '/feeds'), { name: 'elsewhere' }],
        ['POST', projectPath(b.namespace, '/insights'), { title: 'Elsewhere', value: 1 }],
        ['POST', projectPath(b.namespace, '/invites'), { username: stranger.username }],
      ];
      for (const [method, path, body] of requests) {
        const answer = await call(method, path, limited.token, body);
        expectError(answer, 404, 'not_found', `${method} ${path}`);
        // Word for word what a user who is no member of the project gets.
        const outsider = await call(method, path, stranger.token, body);
        expect(answer.json, `${method} ${path}`).to.deep.equal(outsider.json);
      }
      expectError(await call('GET', projectPath(foreign.namespace), limited.token), 404, 'not_found');
      expect(await everyRowCount()).to.deep.equal(beforeRows);
      expect(await projectState(b.id)).to.deep.equal(beforeB);

      // Its own project it reaches with all its user may do there.
      expectData(await call('GET', projectPath(a.namespace), limited.token));
      expectData(await call('POST', projectPath(a.namespace, '/feeds'), limited.token, { name: namespaceName('f') }), 201);
      // The project list shows its projects alone.
      const list = expectData(await call('GET', '/v1/projects', limited.token));
      expect(list.items.map((p: Project) => p.namespace)).to.deep.equal([a.namespace]);
    });

    it('a limited token is never given an answer recorded for another credential of its user: 422 for its key, its own retries replayed', async () => {
      const limited = await mint(owner.token, { name: 'keys', projects: [a.namespace], scopes: ['events:write'] });
      const reused = key();
      const event = { event: 'Keyed' };
      expectData(await call('POST', projectPath(b.namespace, '/feeds/general/events'), owner.token, event, reused), 201);
      const before = await everyRowCount();
      const answer = await call('POST', projectPath(b.namespace, '/feeds/general/events'), limited.token, event, reused);
      expectError(answer, 422, 'idempotency_key_reused');
      expect(answer.headers.get('idempotent-replayed')).to.equal(null);
      expect(await everyRowCount()).to.deep.equal(before);

      const own = key();
      const first = expectData(await call('POST', projectPath(a.namespace, '/feeds/general/events'), limited.token, event, own), 201);
      const again = await call('POST', projectPath(a.namespace, '/feeds/general/events'), limited.token, event, own);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(expectData(again, 201).id).to.equal(first.id);
    });

    it("a limited token is refused the account's own operations, which reach beyond its projects, even with scope all", async () => {
      const limited = await mint(owner.token, { name: 'only A, all', projects: [a.namespace], scopes: ['all'] });
      const before = await everyRowCount();
      for (const [method, path, body] of [
        ['GET', '/v1/users/me'],
        ['PATCH', '/v1/users/me', { username: 'renamed-by-token' }],
        ['GET', '/v1/users/me/invites'],
        ['POST', '/v1/projects', { name: 'Beyond', namespace: namespaceName() }],
      ] as [string, string, unknown?][]) {
        const answer = await call(method, path, limited.token, body);
        expectError(answer, 403, 'insufficient_scope', `${method} ${path}`);
        expect(answer.json.error.message).to.match(/not limited to projects/);
      }
      expect(await everyRowCount()).to.deep.equal(before);
    });
  });

  describe('refused bodies: 400 invalid_request pointing at the field, and nothing stored', () => {
    const cases: [string, (p: { a: string; foreign: string }) => Record<string, unknown>, string][] = [
      ['an unknown namespace', () => ({ projects: ['no-such-project-anywhere'] }), '/body/projects/0'],
      ["another user's project, alike", (p) => ({ projects: [p.a, p.foreign] }), '/body/projects/1'],
      ['a namespace that is not one', () => ({ projects: ['Not_A_Namespace'] }), '/body/projects/0'],
      ['an empty list of projects', () => ({ projects: [] }), '/body/projects'],
      ['a project twice', (p) => ({ projects: [p.a, p.a] }), '/body/projects'],
      ['projects that are not a list', (p) => ({ projects: p.a }), '/body/projects'],
      ['no scope', () => ({ scopes: [] }), '/body/scopes'],
      ['all with another scope', () => ({ scopes: ['all', 'read'] }), '/body/scopes'],
      ['a scope twice', () => ({ scopes: ['read', 'read'] }), '/body/scopes'],
      ['an unknown scope', () => ({ scopes: ['write'] }), '/body/scopes/0'],
      ['scopes that are not a list', () => ({ scopes: 'read' }), '/body/scopes'],
    ];
    for (const [rule, body, path] of cases) {
      it(`refuses ${rule}`, async () => {
        const before = await everyRowCount();
        const answer = await call('POST', '/v1/auth/tokens', owner.token, {
          name: 'refused',
          ...body({ a: a.namespace, foreign: foreign.namespace }),
        });
        expectInvalid(answer, path);
        expect(await everyRowCount()).to.deep.equal(before);
      });
    }

    it('words an unknown namespace and one of a project the caller is not in alike', async () => {
      const unknown = await call('POST', '/v1/auth/tokens', owner.token, { name: 'x', projects: ['no-such-project-anywhere'] });
      const foreignOne = await call('POST', '/v1/auth/tokens', owner.token, { name: 'x', projects: [foreign.namespace] });
      expect(foreignOne.json).to.deep.equal(unknown.json);
      expect(unknown.json.error).to.deep.equal({
        code: 'invalid_request',
        message: 'Invalid request: /body/projects/0 is not a project you are a member of.',
        details: [{ path: '/body/projects/0', message: 'is not a project you are a member of' }],
      });
    });
  });

  describe('what a limited token reaches over time', () => {
    it('follows a renamed project: the token works under the new namespace, and the list shows it', async () => {
      const project = await createProject(owner.token, { name: 'To be renamed' });
      const made = await mint(owner.token, { name: 'follows', projects: [project.namespace], scopes: ['read', 'events:write'] });
      const renamed = namespaceName('renamed');
      expectData(await call('PATCH', projectPath(project.namespace), owner.token, { namespace: renamed }));
      expectError(await call('GET', projectPath(project.namespace), made.token), 404, 'not_found');
      expect(expectData(await call('GET', projectPath(renamed), made.token)).id).to.equal(project.id);
      expectData(await call('POST', projectPath(renamed, '/feeds/general/events'), made.token, { event: 'After the rename' }), 201);
      expect((await listed(owner.token, made.id)).projects).to.deep.equal([renamed]);
    });

    it('lists only the projects its user is still in; a token whose projects are all gone reaches none, not all', async () => {
      const member = await signUp();
      const theirs = await createProject(stranger.token, { name: 'Left later' });
      await addMember(stranger.token, theirs.namespace, member);
      const own = await createProject(member.token, { name: 'Deleted later' });
      const other = await createProject(member.token, { name: 'Never in the token' });
      const made = await mint(member.token, { name: 'two projects', projects: [theirs.namespace, own.namespace], scopes: ['read'] });
      expect((await listed(member.token, made.id)).projects).to.deep.equal([theirs.namespace, own.namespace].sort());

      expect((await call('DELETE', projectPath(theirs.namespace, `/members/${member.username}`), member.token)).status).to.equal(204);
      expect((await listed(member.token, made.id)).projects).to.deep.equal([own.namespace]);
      expectError(await call('GET', projectPath(theirs.namespace), made.token), 404, 'not_found');

      expect((await call('DELETE', projectPath(own.namespace), member.token)).status).to.equal(204);
      expect(await count('select count(*)::int from api_token_projects where token_id = ? and project_id = ?', [made.id, own.id])).to.equal(
        0,
      );
      expect((await listed(member.token, made.id)).projects).to.deep.equal([]);
      expect(expectData(await call('GET', '/v1/projects', made.token)).items).to.deep.equal([]);
      expectError(await call('GET', projectPath(other.namespace), made.token), 404, 'not_found');

      // Back in the project it was made for, the token reaches it again.
      await addMember(stranger.token, theirs.namespace, member);
      expectData(await call('GET', projectPath(theirs.namespace), made.token));
      expect((await listed(member.token, made.id)).projects).to.deep.equal([theirs.namespace]);
    });

    it('a revoked token takes its project rows with it', async () => {
      const made = await mint(owner.token, { name: 'revoked', projects: [a.namespace, b.namespace], scopes: ['read'] });
      expect(await count('select count(*)::int from api_token_projects where token_id = ?', [made.id])).to.equal(2);
      expect((await call('DELETE', `/v1/auth/tokens/${made.id}`, owner.token)).status).to.equal(204);
      expect(await count('select count(*)::int from api_token_projects where token_id = ?', [made.id])).to.equal(0);
    });
  });

  describe('CORS for a publish-only token in a web page', () => {
    const ORIGIN = 'https://shop.example.com';
    let server: TestServer;
    let publisher: Token;
    let project: Project;

    before(async function () {
      this.timeout(60_000);
      server = await startExtraServer({ CORS_ORIGINS: ORIGIN });
      const user = await signUpOn(server);
      project = await createProject(user.token, { name: 'Shop' }, server.url);
      publisher = await mint(user.token, { name: 'shop page', projects: [project.namespace], scopes: ['events:write'] }, server.url);
    });

    after(async () => {
      await server?.close();
    });

    const preflight = (path: string, method: string, origin = ORIGIN) =>
      send(server.url, {
        method: 'OPTIONS',
        path,
        headers: {
          Origin: origin,
          'Access-Control-Request-Method': method,
          'Access-Control-Request-Headers': 'authorization,content-type,idempotency-key',
        },
      });

    it('answers the preflight of both publishing routes, allowing what a page sends', async () => {
      for (const path of [projectPath(project.namespace, '/feeds/general/events'), projectPath(project.namespace, '/events')]) {
        const answer = await preflight(path, 'POST');
        expect(answer.status, path).to.equal(204);
        expect(answer.text).to.equal('');
        expect(answer.headers.get('access-control-allow-origin')).to.equal(ORIGIN);
        expect(answer.headers.get('access-control-allow-methods')).to.equal('POST');
        expect(answer.headers.get('access-control-allow-headers')).to.equal('Authorization, Content-Type, Idempotency-Key');
        expect(answer.headers.get('vary')).to.contain('Origin');
      }
    });

    it('lets the page read the answer of a publication made with the publish-only token', async () => {
      const before = await count('select count(*)::int from events where project_id = ?', [project.id], server.db);
      const headers = { Origin: ORIGIN, ...key() };
      const one = await send(server.url, {
        method: 'POST',
        path: projectPath(project.namespace, '/feeds/general/events'),
        token: publisher.token,
        headers,
        json: { event: 'Checkout started' },
      });
      expectData(one, 201);
      expect(one.headers.get('access-control-allow-origin')).to.equal(ORIGIN);
      const replayed = await send(server.url, {
        method: 'POST',
        path: projectPath(project.namespace, '/feeds/general/events'),
        token: publisher.token,
        headers,
        json: { event: 'Checkout started' },
      });
      expect(replayed.headers.get('idempotent-replayed')).to.equal('true');
      expect(replayed.headers.get('access-control-expose-headers')).to.contain('Idempotent-Replayed');
      const batch = await send(server.url, {
        method: 'POST',
        path: projectPath(project.namespace, '/events'),
        token: publisher.token,
        headers: { Origin: ORIGIN },
        json: { events: [{ feed: 'general', event: 'Paid' }] },
      });
      expectData(batch, 201);
      expect(batch.headers.get('access-control-allow-origin')).to.equal(ORIGIN);
      expect(await count('select count(*)::int from events where project_id = ?', [project.id], server.db)).to.equal(before + 2);
    });

    it('answers no CORS on any other route, nor to another origin', async () => {
      const read = await send(server.url, {
        method: 'GET',
        path: projectPath(project.namespace, '/events'),
        token: publisher.token,
        headers: { Origin: ORIGIN },
      });
      expectError(read, 403, 'insufficient_scope');
      expect(read.headers.get('access-control-allow-origin')).to.equal(null);
      for (const [path, method] of [
        [projectPath(project.namespace, '/events'), 'GET'],
        [projectPath(project.namespace), 'PATCH'],
        ['/v1/projects', 'POST'],
        ['/v1/auth/tokens', 'POST'],
      ] as const) {
        const answer = await preflight(path, method);
        expect(answer.status, `${method} ${path}`).to.equal(405);
        expect(answer.headers.get('access-control-allow-origin'), `${method} ${path}`).to.equal(null);
      }
      const me = await send(server.url, { method: 'GET', path: '/v1/users/me', token: publisher.token, headers: { Origin: ORIGIN } });
      expect(me.headers.get('access-control-allow-origin')).to.equal(null);
      const elsewhere = await preflight(projectPath(project.namespace, '/feeds/general/events'), 'POST', 'https://evil.example.net');
      expect(elsewhere.status).to.equal(405);
      expect(elsewhere.headers.get('access-control-allow-origin')).to.equal(null);
    });

    it('is off without CORS_ORIGINS (the run’s own server)', async () => {
      const answer = await call('OPTIONS', projectPath(a.namespace, '/feeds/general/events'), undefined, undefined, {
        Origin: ORIGIN,
        'Access-Control-Request-Method': 'POST',
      });
      expect(answer.status).to.equal(405);
      expect(answer.headers.get('access-control-allow-origin')).to.equal(null);
    });
  });
});
