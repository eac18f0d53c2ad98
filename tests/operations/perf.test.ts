/**
 * Performance properties that are behaviour, not figures (the figures come from `npm run bench`):
 * a project read runs the same number of SQL statements whatever the project's size, bcrypt runs
 * on worker threads with the same results as on the event loop, and no server code builds an
 * object literal with a getter.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { v7 } from 'uuid';
import { PasswordPool, WORKER_NICE } from '../../server/src/domain/passwords.js';
import { secret, sql } from '../support/harness.js';
import { inviteCode, signUp, uniqueName, type TestUser } from '../support/accounts.js';
import { call, expectData, http } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { statementsDuring } from '../support/statements.js';

/** Adds `members` accounts as members and `feeds` feeds to a project, straight into the database. */
async function grow(projectId: string, members: number, feeds: number): Promise<void> {
  const now = new Date();
  for (let i = 0; i < members; i++) {
    const userId = v7();
    const username = uniqueName('bulk').toLowerCase();
    await sql(`insert into users (id, username, email, password_hash, icon, created_at, updated_at) values (?, ?, ?, 'x', null, ?, ?)`, [
      userId,
      username,
      `${username}@example.com`,
      now,
      now,
    ]);
    await sql(`insert into project_members (id, project_id, user_id, role, created_at) values (?, ?, ?, 'member', ?)`, [
      v7(),
      projectId,
      userId,
      now,
    ]);
  }
  for (let i = 0; i < feeds; i++) {
    await sql(`insert into feeds (id, project_id, name, description, emoji, type, created_at) values (?, ?, ?, null, null, 0, ?)`, [
      v7(),
      projectId,
      `bulk-${i}`,
      now,
    ]);
  }
}

/** `file:line` of every getter or setter written in an object literal under `dir`. */
function literalAccessors(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.ts')) continue;
    const file = path.join(dir, entry);
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if ((ts.isGetAccessor(node) || ts.isSetAccessor(node)) && ts.isObjectLiteralExpression(node.parent)) {
        found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe('performance properties', () => {
  let owner: TestUser;

  before(async () => {
    owner = await signUp();
  });

  it(
    'no server code writes a getter or setter in an object literal (one can keep what it closes over, a whole request, alive through ' +
      'every young-generation collection)',
    () => {
      expect(literalAccessors('server/src')).to.deep.equal([]);
    },
  );

  it(
    'a project read and the project list run the same number of SQL statements for 1 member and feed as for 100 of ' + 'each',
    async function () {
      this.timeout(120_000);
      const small = await createProject(owner.token);
      const large = await createProject(owner.token);
      await grow(large.id, 99, 99);

      const read = async (namespace: string) => {
        // The first use of a credential within a minute may also refresh its last-use time: warm up first.
        expectData(await call('GET', projectPath(namespace), owner.token));
        let data: any;
        const statements = await statementsDuring(async () => {
          data = expectData(await call('GET', projectPath(namespace), owner.token));
        });
        return { statements, data };
      };
      const one = await read(small.namespace);
      const hundred = await read(large.namespace);
      expect(one.data.members).to.have.length(1);
      expect(one.data.feeds).to.have.length(1);
      expect(hundred.data.members).to.have.length(100);
      expect(hundred.data.feeds).to.have.length(100);
      expect(hundred.statements.length, hundred.statements.join('\n')).to.equal(one.statements.length);
      // Bounded, and small: credential, then the project with the caller's membership, members and feeds.
      expect(one.statements.length, one.statements.join('\n')).to.equal(2);
      // The owner comes first, then members by the time they joined; feeds by creation.
      expect(hundred.data.members[0].username).to.equal(owner.username);
      expect(hundred.data.feeds[0].name).to.equal('general');
      expect(hundred.data.feeds.slice(1).map((f: any) => f.name)).to.deep.equal(Array.from({ length: 99 }, (_, i) => `bulk-${i}`));

      // The list loads each page's members and feeds in the same statements for every project on it.
      const list = async () => {
        let page: any;
        const statements = await statementsDuring(async () => {
          page = expectData(await call('GET', '/v1/projects?limit=100', owner.token));
        });
        return { statements, page };
      };
      const before = await list();
      const third = await createProject(owner.token);
      await grow(third.id, 50, 50);
      const after = await list();
      expect(after.page.items.length).to.equal(before.page.items.length + 1);
      expect(after.statements.length, after.statements.join('\n')).to.equal(before.statements.length);
      expect(after.page.items.find((p: any) => p.id === third.id).members).to.have.length(51);
    },
  );

  it(
    'hashes passwords on worker threads: more jobs than workers all finish, with the results bcryptjs gives on the event ' + 'loop',
    async () => {
      const nice = (task: string) => Number(readFileSync(`/proc/self/task/${task}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);
      const startingNice = process.platform === 'linux' ? nice(String(process.pid)) : 0;
      const pool = new PasswordPool(2);
      try {
        const passwords = Array.from({ length: 7 }, (_, i) => `password number ${i} ✓`);
        const hashes = await Promise.all(passwords.map((p) => pool.hash(p, 4)));
        for (const [i, hash] of hashes.entries()) {
          expect(hash).to.match(/^\$2b\$04\$/);
          expect(bcrypt.compareSync(passwords[i]!, hash)).to.equal(true);
          expect(await pool.compare(passwords[i]!, hash)).to.equal(true);
          expect(await pool.compare(`${passwords[i]!}x`, hash)).to.equal(false);
        }
        expect(await pool.compare('known', bcrypt.hashSync('known', 4))).to.equal(true);
        expect(pool.load).to.deep.equal({ queued: 0, running: 0, workers: 2 });
        // On Linux each worker lowers its own thread's priority; the event loop keeps its own (the
        // one the run started with: 0, or more under `nice`, when the workers' change shows only
        // if they were above it).
        if (process.platform === 'linux') {
          expect(nice(String(process.pid))).to.equal(startingNice);
          if (startingNice < WORKER_NICE) {
            expect(readdirSync('/proc/self/task').filter((task) => nice(task) === WORKER_NICE)).to.have.length.of.at.least(2);
          }
        }
      } finally {
        await pool.close();
      }
      let refused: unknown;
      await pool.hash('after close', 4).catch((error: unknown) => (refused = error));
      expect(refused).to.be.instanceOf(Error);
    },
  );

  it(
    'a burst of 20 concurrent sign-ups all succeed, each with its own working password, and the service answers ' + 'meanwhile',
    async function () {
      this.timeout(120_000);
      const users = Array.from({ length: 20 }, () => ({ username: uniqueName('burst'), password: secret(`burst-${v7()}`) }));
      const invites = await Promise.all(users.map(() => inviteCode()));
      const signups = Promise.all(
        users.map((u, i) =>
          call('POST', '/v1/auth/signup', undefined, {
            username: u.username,
            email: `${u.username}@example.com`,
            password: u.password,
            invite: invites[i],
          }),
        ),
      );
      // Other requests are answered while the hashes run.
      const root = await http('GET', '/v1');
      expect(root.status).to.equal(200);
      const answers = await signups;
      for (const answer of answers) secret(expectData(answer, 201).token);
      const logins = await Promise.all(
        users.map((u) => call('POST', '/v1/auth/login', undefined, { login: u.username, password: u.password })),
      );
      for (const answer of logins) secret(expectData(answer, 201).token);
      const wrong = await call('POST', '/v1/auth/login', undefined, { login: users[0]!.username, password: 'not the password' });
      expect(wrong.status).to.equal(401);
    },
  );
});
