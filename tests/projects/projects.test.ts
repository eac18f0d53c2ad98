/**
 * Projects: create, list, change, delete, and their icons, as the contract and the README
 * describe them; each answer checked whole, and the database checked for what it holds afterwards.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { baseUrl, count, sha256, sql } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid, expectNoContent, ISO_UTC, tally, UUID7, walk } from '../support/http.js';
import {
  addMember,
  createInsight,
  createProject,
  expectNoRowsOfProject,
  iconUrl,
  invite,
  member,
  namespaceName,
  projectPath,
  rowsOfProject,
} from '../support/projects.js';
import { notPng, png, pngOfSize, storedIcon } from '../support/png.js';

const DATA_URL = 'data:image/png;base64,';

/** A PNG no other test uses, so that its hash names no file unless this test stored it. */
function uniquePng(width = 8, height = 8): Buffer {
  const [r, g, b] = randomBytes(3);
  return png(width, height, { color: [r!, g!, b!] });
}

async function projectRow(namespace: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await sql('select id, namespace, name, icon, tier, billing_id from projects where namespace = ?', [namespace]);
  return row;
}

async function countNamespace(namespace: string): Promise<number> {
  return count('select count(*)::int as n from projects where namespace = ?', [namespace]);
}

/** GET on an icon address: status, type, caching and bytes. */
async function fetchIcon(url: string) {
  const response = await fetch(url);
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    cacheControl: response.headers.get('cache-control') ?? '',
    bytes: Buffer.from(await response.arrayBuffer()),
  };
}

function maxAge(cacheControl: string): number {
  return Number(/max-age=(\d+)/.exec(cacheControl)?.[1] ?? 0);
}

describe('projects', () => {
  let owner: TestUser;
  before(async () => {
    owner = await signUp();
  });

  describe('POST /v1/projects', () => {
    it('answers 201 with the new project: one feed general of type 0, its creator as owner, tier 0, no billing, name trimmed', async () => {
      const namespace = namespaceName();
      const answer = await call('POST', '/v1/projects', owner.token, { name: '  Acme Analytics \t', namespace });
      const project = expectData(answer, 201);
      expect(project).to.deep.equal({
        id: project.id,
        namespace,
        name: 'Acme Analytics',
        icon: null,
        tier: 0,
        billing_id: null,
        feeds: [{ id: project.feeds[0]?.id, name: 'general', description: null, emoji: null, type: 0 }],
        members: [member(owner, 'owner')],
        created_at: project.created_at,
      });
      expect(project.id).to.match(UUID7);
      expect(project.feeds[0].id).to.match(UUID7);
      expect(project.created_at).to.match(ISO_UTC);
      expect(Date.now() - Date.parse(project.created_at)).to.be.within(-5_000, 60_000);

      expect(await projectRow(namespace)).to.deep.equal({
        id: project.id,
        namespace,
        name: 'Acme Analytics',
        icon: null,
        tier: 0,
        billing_id: null,
      });
      expect(await sql('select user_id, role from project_members where project_id = ?', [project.id])).to.deep.equal([
        { user_id: owner.id, role: 'owner' },
      ]);
      expect(await sql('select name, description, emoji, type from feeds where project_id = ?', [project.id])).to.deep.equal([
        { name: 'general', description: null, emoji: null, type: 0 },
      ]);
      // And GET answers the same project.
      expect(expectData(await call('GET', projectPath(namespace), owner.token))).to.deep.equal(project);
    });

    for (const [field, value] of [
      ['tier', 2],
      ['billing_id', 'sub_123'],
      ['tier', 0],
      ['billing_id', null],
    ] as const) {
      it(`refuses ${field}: ${JSON.stringify(value)} in the body with 400, and creates nothing`, async () => {
        const namespace = namespaceName();
        const answer = await call('POST', '/v1/projects', owner.token, { name: 'Sneaky', namespace, [field]: value });
        expectError(answer, 400, 'invalid_request');
        expect(await countNamespace(namespace)).to.equal(0);
      });
    }

    const badNamespaces: [string, string][] = [
      ['two characters', 'ab'],
      ['41 characters', 'a'.repeat(41)],
      ['upper case', 'Acme'],
      ['all upper case', 'ACME-CO'],
      ['a leading hyphen', '-acme'],
      ['a trailing hyphen', 'acme-'],
      ['an underscore', 'acme_co'],
      ['a space', 'acme co'],
      ['a dot', 'acme.co'],
      ['a non-ASCII letter', 'acmé'],
      ['nothing', ''],
    ];
    for (const [what, bad] of badNamespaces) {
      it(`refuses a namespace with ${what} (${JSON.stringify(bad)}) with 400 at /body/namespace, and creates nothing`, async () => {
        const answer = await call('POST', '/v1/projects', owner.token, { name: 'Bad namespace', namespace: bad });
        expectInvalid(answer, '/body/namespace');
        expect(await countNamespace(bad)).to.equal(0);
        expect(await countNamespace(bad.toLowerCase())).to.equal(0);
      });
    }

    it('accepts namespaces of exactly 3 and 40 characters, with inner hyphens and digits', async () => {
      const three = `z${randomBytes(1).toString('hex')}`;
      const forty = `9-${namespaceName()}`.padEnd(40, 'x');
      expect(forty).to.have.length(40);
      for (const namespace of [three, forty]) {
        const project = expectData(await call('POST', '/v1/projects', owner.token, { name: 'Edge', namespace }), 201, namespace);
        expect(project.namespace).to.equal(namespace);
        expect(await countNamespace(namespace)).to.equal(1);
      }
    });

    for (const [what, name] of [
      ['empty', ''],
      ['only white space', '   '],
      ['101 characters', 'n'.repeat(101)],
    ] as const) {
      it(`refuses a name that is ${what} with 400 at /body/name`, async () => {
        const namespace = namespaceName();
        expectInvalid(await call('POST', '/v1/projects', owner.token, { name, namespace }), '/body/name');
        expect(await countNamespace(namespace)).to.equal(0);
      });
    }

    it('answers 409 namespace_taken for a namespace in use, whoever asks, and changes nothing', async () => {
      const first = await createProject(owner.token, { name: 'First' });
      const other = await signUp();
      for (const token of [owner.token, other.token]) {
        expectError(await call('POST', '/v1/projects', token, { name: 'Second', namespace: first.namespace }), 409, 'namespace_taken');
      }
      expect(await projectRow(first.namespace)).to.include({ id: first.id, name: 'First' });
      expect(
        await count(
          'select count(*)::int as n from projects p join project_members m on m.project_id = p.id where m.user_id = ? and p.name = ?',
          [other.id, 'Second'],
        ),
      ).to.equal(0);
    });

    it(
      'settles a race: 50 concurrent creates of one namespace give exactly one 201 and 49 × 409 namespace_taken, and one ' + 'row',
      async function () {
        this.timeout(60_000);
        const namespace = namespaceName('race');
        const answers = await Promise.all(
          Array.from({ length: 50 }, (_, i) => call('POST', '/v1/projects', owner.token, { name: `Racer ${i}`, namespace })),
        );
        expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 49 });
        for (const answer of answers.filter((a) => a.status === 409)) expectError(answer, 409, 'namespace_taken');
        const winner = expectData(
          answers.find((a) => a.status === 201)!,
          201,
        );
        expect(await countNamespace(namespace)).to.equal(1);
        expect(await rowsOfProject(winner.id)).to.deep.include({ projects: 1, project_members: 1, feeds: 1, activity: 1 });
        // No loser left a member or a feed behind.
        expect(
          await count('select count(*)::int as n from project_members m left join projects p on p.id = m.project_id where p.id is null'),
        ).to.equal(0);
        expect(
          await count('select count(*)::int as n from feeds f left join projects p on p.id = f.project_id where p.id is null'),
        ).to.equal(0);
      },
    );

    it('answers 401 unauthenticated without a credential, and creates nothing', async () => {
      const namespace = namespaceName();
      expectError(await call('POST', '/v1/projects', undefined, { name: 'Anonymous', namespace }), 401, 'unauthenticated');
      expect(await countNamespace(namespace)).to.equal(0);
    });
  });

  describe('GET /v1/projects', () => {
    it('lists only the caller’s projects (owned or joined, not merely invited to), newest first, paginated', async function () {
      this.timeout(30_000);
      const [alice, bob, carol] = await Promise.all([signUp(), signUp(), signUp()]);
      const p1 = await createProject(alice.token, { name: 'One' });
      const p2 = await createProject(alice.token, { name: 'Two' });
      const p3 = await createProject(alice.token, { name: 'Three' });
      await createProject(bob.token, { name: 'Bob alone' });
      const p5 = await createProject(bob.token, { name: 'Bob with Alice' });
      await addMember(bob.token, p5.namespace, alice);
      const p6 = await createProject(carol.token, { name: 'Carol invites' });
      await invite(carol.token, p6.namespace, alice.username);

      const first = expectData(await call('GET', '/v1/projects', alice.token));
      const expected = [p5, p3, p2, p1].map((p) => p.namespace);
      expect(first.items.map((p: any) => p.namespace)).to.deep.equal(expected);
      expect(first.next_cursor).to.equal(null);
      // Each item is the whole Project, as GET answers it.
      for (const item of first.items) {
        expect(item).to.deep.equal(expectData(await call('GET', projectPath(item.namespace), alice.token)));
      }

      const paged = await walk(alice.token, '/v1/projects', 3);
      expect(paged.pages).to.deep.equal([3, 1]);
      expect(paged.items.map((p: any) => p.namespace)).to.deep.equal(expected);

      const one = expectData(await call('GET', '/v1/projects?limit=1', bob.token));
      expect(one.items.map((p: any) => p.namespace)).to.deep.equal([p5.namespace]);
      expect(one.next_cursor).to.be.a('string');

      const fresh = await signUp();
      expect(expectData(await call('GET', '/v1/projects', fresh.token))).to.deep.equal({ items: [], next_cursor: null });
    });

    it('refuses a limit out of 1–100 and a cursor it did not issue with 400', async () => {
      expectInvalid(await call('GET', '/v1/projects?limit=0', owner.token), '/query/limit');
      expectInvalid(await call('GET', '/v1/projects?limit=101', owner.token), '/query/limit');
      expectInvalid(await call('GET', '/v1/projects?cursor=not-ours', owner.token), '/query/cursor');
    });
  });

  describe('PATCH /v1/projects/{namespace}', () => {
    it('renames and moves a project: the old namespace answers 404 at once, the new one works', async () => {
      const project = await createProject(owner.token, { name: 'Before' });
      const moved = namespaceName('moved');
      const updated = expectData(await call('PATCH', projectPath(project.namespace), owner.token, { name: '  After  ', namespace: moved }));
      expect(updated).to.deep.equal({ ...project, name: 'After', namespace: moved });
      expectError(await call('GET', projectPath(project.namespace), owner.token), 404, 'not_found');
      expect(expectData(await call('GET', projectPath(moved), owner.token))).to.deep.equal(updated);
      expect(await projectRow(moved)).to.include({ id: project.id, name: 'After' });
      expect(await countNamespace(project.namespace)).to.equal(0);
      // The old namespace is free again.
      expect((await createProject(owner.token, { namespace: project.namespace })).id).to.not.equal(project.id);
    });

    it('changes only what the body names; an empty body changes nothing', async () => {
      const project = await createProject(owner.token, { name: 'Keep' });
      expect(expectData(await call('PATCH', projectPath(project.namespace), owner.token, {}))).to.deep.equal(project);
      const renamed = expectData(await call('PATCH', projectPath(project.namespace), owner.token, { name: 'Kept' }));
      expect(renamed).to.deep.equal({ ...project, name: 'Kept' });
    });

    it('answers 409 namespace_taken when moving to a namespace in use, and changes nothing', async () => {
      const a = await createProject(owner.token, { name: 'A' });
      const b = await createProject(owner.token, { name: 'B' });
      expectError(
        await call('PATCH', projectPath(a.namespace), owner.token, { name: 'A renamed', namespace: b.namespace }),
        409,
        'namespace_taken',
      );
      expect(expectData(await call('GET', projectPath(a.namespace), owner.token))).to.deep.equal(a);
      expect(expectData(await call('GET', projectPath(b.namespace), owner.token))).to.deep.equal(b);
      expect(await projectRow(a.namespace)).to.include({ id: a.id, name: 'A' });
    });

    it('refuses a member with 403 not_owner and a non-member with 404, and changes nothing', async () => {
      const [mate, stranger] = await Promise.all([signUp(), signUp()]);
      const project = await createProject(owner.token, { name: 'Mine' });
      await addMember(owner.token, project.namespace, mate);
      const moved = namespaceName();
      expectError(await call('PATCH', projectPath(project.namespace), mate.token, { name: 'Theirs', namespace: moved }), 403, 'not_owner');
      expectError(
        await call('PATCH', projectPath(project.namespace), stranger.token, { name: 'Theirs', namespace: moved }),
        404,
        'not_found',
      );
      expect(await projectRow(project.namespace)).to.include({ id: project.id, name: 'Mine' });
      expect(await countNamespace(moved)).to.equal(0);
    });

    for (const body of [{ tier: 3 }, { billing_id: 'sub_x' }, { name: 'Paid', tier: 1 }, { name: 'Paid', billing_id: null }]) {
      it(`refuses ${JSON.stringify(body)} with 400 and changes nothing`, async () => {
        const project = await createProject(owner.token, { name: 'Free' });
        expectError(await call('PATCH', projectPath(project.namespace), owner.token, body), 400, 'invalid_request');
        expect(await projectRow(project.namespace)).to.deep.equal({
          id: project.id,
          namespace: project.namespace,
          name: 'Free',
          icon: null,
          tier: 0,
          billing_id: null,
        });
      });
    }

    it('refuses a bad namespace with 400 at /body/namespace, and changes nothing', async () => {
      const project = await createProject(owner.token);
      for (const bad of ['Upper', 'x', 'end-', 'under_score']) {
        expectInvalid(await call('PATCH', projectPath(project.namespace), owner.token, { namespace: bad }), '/body/namespace', bad);
      }
      expect(await projectRow(project.namespace)).to.include({ id: project.id });
    });
  });

  describe('DELETE /v1/projects/{namespace}', () => {
    it('answers 204, then 404; no row of the project is left anywhere; the namespace can be used again', async function () {
      this.timeout(30_000);
      const [mate, guest] = await Promise.all([signUp(), signUp()]);
      const project = await createProject(owner.token, { name: 'Doomed', icon: uniquePng().toString('base64') });
      await addMember(owner.token, project.namespace, mate);
      await invite(owner.token, project.namespace, guest.username);
      await createInsight(mate.token, project.namespace, { title: 'Visitors', value: 3 });
      expectData(await call('POST', projectPath(project.namespace, '/feeds/general/events'), owner.token, { event: 'Signed up' }), 201);
      const before = await rowsOfProject(project.id);
      for (const table of ['projects', 'project_members', 'feeds', 'project_invites', 'insights', 'activity']) {
        expect(before[table], table).to.be.greaterThan(0);
      }

      expectNoContent(await call('DELETE', projectPath(project.namespace), owner.token));
      expectError(await call('GET', projectPath(project.namespace), owner.token), 404, 'not_found');
      expectError(await call('GET', projectPath(project.namespace), mate.token), 404, 'not_found');
      expectError(await call('DELETE', projectPath(project.namespace), owner.token), 404, 'not_found');
      await expectNoRowsOfProject(project.id);
      // Gone from the lists of its members and from the invitee's invites.
      expect(expectData(await call('GET', '/v1/projects', mate.token)).items).to.deep.equal([]);
      expect(expectData(await call('GET', '/v1/users/me/invites', guest.token)).items).to.deep.equal([]);

      const again = await createProject(owner.token, { namespace: project.namespace, name: 'Reborn' });
      expect(again.id).to.not.equal(project.id);
      expect(again.members).to.deep.equal([member(owner, 'owner')]);
    });

    it('refuses an API token with 403 session_required and a member with 403 not_owner; the project stays whole', async () => {
      const mate = await signUp();
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, mate);
      const before = await rowsOfProject(project.id);
      expectError(await call('DELETE', projectPath(project.namespace), await apiToken(owner.token)), 403, 'session_required');
      expectError(await call('DELETE', projectPath(project.namespace), mate.token), 403, 'not_owner');
      expect(await rowsOfProject(project.id)).to.deep.equal(before);
      expect(expectData(await call('GET', projectPath(project.namespace), owner.token)).id).to.equal(project.id);
    });

    it('of two concurrent deletes, one answers 204 and the other 404', async () => {
      const project = await createProject(owner.token);
      const answers = await Promise.all([1, 2].map(() => call('DELETE', projectPath(project.namespace), owner.token)));
      expect(answers.map((a) => a.status).sort()).to.deep.equal([204, 404]);
      expectError(
        answers.find((a) => a.status === 404)!,
        404,
        'not_found',
      );
      expect(await countNamespace(project.namespace)).to.equal(0);
    });
  });

  describe('icons', () => {
    /** `bytes` as sent: the service stores and serves their re-encoding. */
    async function expectServed(icon: string, bytes: Buffer): Promise<void> {
      const stored = storedIcon(bytes);
      const sha = sha256(stored);
      expect(icon).to.equal(iconUrl(sha));
      expect(icon.endsWith(`/cdn/icons/${sha}.png`)).to.equal(true);
      const served = await fetchIcon(icon);
      expect(served.status).to.equal(200);
      expect(served.type).to.equal('image/png');
      expect(served.bytes.equals(stored), 'the served bytes are the re-encoded upload').to.equal(true);
      expect(served.cacheControl).to.include('public');
      expect(maxAge(served.cacheControl), served.cacheControl).to.be.at.least(30 * 24 * 3600);
    }

    it('takes a bare Base64 PNG on create and serves its re-encoding at /cdn/icons/<sha256>.png', async () => {
      const bytes = uniquePng(16, 16);
      const project = await createProject(owner.token, { icon: bytes.toString('base64') });
      await expectServed(project.icon, bytes);
      expect(await projectRow(project.namespace)).to.include({ icon: sha256(storedIcon(bytes)) });
      expect(expectData(await call('GET', projectPath(project.namespace), owner.token)).icon).to.equal(project.icon);
    });

    it('takes a PNG data URL on create', async () => {
      const bytes = uniquePng(32, 20);
      const project = await createProject(owner.token, { icon: DATA_URL + bytes.toString('base64') });
      await expectServed(project.icon, bytes);
    });

    it('shares one stored icon between projects with the same icon', async () => {
      const bytes = uniquePng();
      const a = await createProject(owner.token, { icon: bytes.toString('base64') });
      const b = await createProject(owner.token, { icon: DATA_URL + bytes.toString('base64') });
      expect(a.icon).to.equal(b.icon);
      await expectServed(b.icon, bytes);
    });

    it(
      'on PATCH takes a data URL, refuses bare Base64 with 400 at /body/icon (nothing changed), and removes the icon on ' + 'null',
      async () => {
        const first = uniquePng();
        const project = await createProject(owner.token, { icon: first.toString('base64') });

        const bare = uniquePng();
        expectInvalid(await call('PATCH', projectPath(project.namespace), owner.token, { icon: bare.toString('base64') }), '/body/icon');
        expect(await projectRow(project.namespace)).to.include({ icon: sha256(storedIcon(first)) });
        expect((await fetchIcon(iconUrl(sha256(storedIcon(bare))))).status).to.equal(404);

        const second = uniquePng(20, 10);
        const changed = expectData(
          await call('PATCH', projectPath(project.namespace), owner.token, { icon: DATA_URL + second.toString('base64') }),
        );
        expect(changed).to.deep.equal({ ...project, icon: iconUrl(sha256(storedIcon(second))) });
        await expectServed(changed.icon, second);

        const removed = expectData(await call('PATCH', projectPath(project.namespace), owner.token, { icon: null }));
        expect(removed).to.deep.equal({ ...project, icon: null });
        expect(await projectRow(project.namespace)).to.include({ icon: null });
        expect(expectData(await call('GET', projectPath(project.namespace), owner.token)).icon).to.equal(null);
      },
    );

    const refused: [string, () => Buffer][] = [
      ['a file that is not a PNG', () => Buffer.concat([notPng, randomBytes(8)])],
      ['a PNG over 256 KiB', () => pngOfSize(300 * 1024)],
      ['a PNG one byte over 256 KiB', () => pngOfSize(256 * 1024 + 1)],
      ['a PNG over 1024 pixels wide', () => uniquePng(1025, 10)],
      ['a PNG over 1024 pixels high', () => uniquePng(10, 1025)],
    ];
    for (const [what, make] of refused) {
      it(`refuses ${what} with 400 at /body/icon: no project, no icon stored (create), nothing changed (update)`, async () => {
        const bytes = make();
        const namespace = namespaceName();
        for (const icon of [bytes.toString('base64'), DATA_URL + bytes.toString('base64')]) {
          expectInvalid(await call('POST', '/v1/projects', owner.token, { name: 'Iconic', namespace, icon }), '/body/icon');
          expect(await countNamespace(namespace)).to.equal(0);
        }
        const project = await createProject(owner.token);
        expectInvalid(
          await call('PATCH', projectPath(project.namespace), owner.token, { icon: DATA_URL + bytes.toString('base64') }),
          '/body/icon',
        );
        expect(await projectRow(project.namespace)).to.include({ icon: null });
        const served = await fetchIcon(iconUrl(sha256(bytes)));
        expect(served.status, 'the refused icon is not served').to.equal(404);
      });
    }

    it('stores no icon for a project refused with 409 namespace_taken, on create and on update', async () => {
      const taken = await createProject(owner.token);
      const onCreate = uniquePng();
      expectError(
        await call('POST', '/v1/projects', owner.token, { name: 'Late', namespace: taken.namespace, icon: onCreate.toString('base64') }),
        409,
        'namespace_taken',
      );
      expect((await fetchIcon(iconUrl(sha256(storedIcon(onCreate))))).status).to.equal(404);
      expect(await projectRow(taken.namespace)).to.include({ id: taken.id, icon: null });

      const mine = await createProject(owner.token);
      const onUpdate = uniquePng();
      expectError(
        await call('PATCH', projectPath(mine.namespace), owner.token, {
          namespace: taken.namespace,
          icon: DATA_URL + onUpdate.toString('base64'),
        }),
        409,
        'namespace_taken',
      );
      expect((await fetchIcon(iconUrl(sha256(storedIcon(onUpdate))))).status).to.equal(404);
      expect(await projectRow(mine.namespace)).to.include({ id: mine.id, icon: null });
      const recorded = 'select count(*)::int from icons where sha256 in (?, ?)';
      expect(await count(recorded, [sha256(storedIcon(onCreate)), sha256(storedIcon(onUpdate))])).to.equal(0);
    });

    it('answers 404 for an icon nobody uploaded', async () => {
      expect((await fetchIcon(`${baseUrl()}/cdn/icons/${sha256(randomBytes(16))}.png`)).status).to.equal(404);
    });
  });
});
