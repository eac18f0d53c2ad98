/**
 * The icon store on the run's database, past the parse: one row per icon, its bytes in the row or in a
 * bucket, reads through the cache, keys, the read cache on its own, a bucket that cannot be reached
 * (503, nothing changed, also through the project domain behind the envelope), and icons an earlier
 * release left on disk moving into the store. The parse is in icons-parse.test.ts, the CDN in
 * icons-cdn.test.ts.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Koa from 'koa';
import { pino } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { Project, User } from '../../server/src/db/entities.js';
import { Projects } from '../../server/src/domain/projects.js';
import type { Scope } from '../../server/src/domain/scope.js';
import { Unavailable } from '../../server/src/errors.js';
import { envelope } from '../../server/src/http/envelope.js';
import { UNLIMITED } from '../../server/src/policies/project.js';
import { moveDiskIcons } from '../../server/src/storage/disk-icons.js';
import { IconCache } from '../../server/src/storage/icon-cache.js';
import { IconStore, type Icon, type IconBucket, type IconRows } from '../../server/src/storage/icons.js';
import { S3Bucket } from '../../server/src/storage/s3.js';
import { count, database, sha256, sql } from '../support/harness.js';
import { iconRow } from '../support/icons.js';
import { freePort } from '../support/pg-cluster.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { createProject, namespaceName } from '../support/projects.js';
import { png, storedIcon } from '../support/png.js';
import { asAnswer, DATA_URL, databaseRows, FIELD, freshIconStore, sender, storedIcons } from './icons-support.js';

/** A bucket that cannot be reached: nothing listens at its address. Every call fails within its 1 s bound. */
async function unreachableBucket(): Promise<S3Bucket> {
  const settings = {
    bucket: 'icons',
    endpoint: `http://127.0.0.1:${await freePort()}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKUNREACHABLE', secretAccessKey: 'unreachable-secret' },
    forcePathStyle: true,
    timeoutMs: 1_000,
  };
  return S3Bucket.open(settings, pino({ level: 'silent' }));
}

/** An in-memory bucket, counting its reads. */
class MemoryBucket implements IconBucket {
  readonly objects = new Map<string, Buffer>();
  reads = 0;

  async put(icon: Icon): Promise<void> {
    this.objects.set(icon.sha256, icon.bytes);
  }

  async get(key: string): Promise<Buffer | undefined> {
    this.reads += 1;
    return this.objects.get(key);
  }

  async delete(keys: string[]): Promise<void> {
    for (const key of keys) this.objects.delete(key);
  }
}

describe('icon store', () => {
  let base: string;
  let store: IconStore;
  let storedBefore: number;
  beforeEach(async () => ({ base, store, storedBefore } = await freshIconStore(() => base)));

  describe('save, read and url', () => {
    it('stores one row per icon with its bytes; saving it again marks it as just stored', async () => {
      const icon = await store.parse(png(16, 16, { color: [1, 2, 3] }).toString('base64'), 'create', FIELD, sender());
      await store.saveAlone(icon);
      await sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [icon.sha256]);
      expect((await iconRow(icon.sha256))!.fresh).to.equal(false);
      await store.saveAlone(icon);
      const row = await iconRow(icon.sha256);
      expect(row).to.deep.equal({ size: icon.bytes.length, bytes: icon.bytes, fresh: true });
      expect(await storedIcons()).to.equal(storedBefore + 1);
      expect((await store.read(icon.sha256))!.equals(icon.bytes)).to.equal(true);
    });

    it('makes one row of concurrent saves of the same icon', async () => {
      const icon = await store.parse(png(9, 9, { color: [4, 5, 6] }).toString('base64'), 'create', FIELD, sender());
      const stores = [1, 2, 3, 4].map(() => new IconStore(databaseRows(), () => base));
      await Promise.all(stores.map((each) => each.saveAlone(icon)));
      expect(await count('select count(*)::int from icons where sha256 = ?', [icon.sha256])).to.equal(1);
      expect(await storedIcons()).to.equal(storedBefore + 1);
    });

    it('with a bucket, keeps the bytes there and only the record in the row', async () => {
      const bucket = new MemoryBucket();
      const bucketed = new IconStore(databaseRows(), () => base, { bucket });
      const icon = await bucketed.parse(png(7, 3, { color: [7, 8, 9] }).toString('base64'), 'create', FIELD, sender());
      await bucketed.saveAlone(icon);
      expect(await iconRow(icon.sha256)).to.deep.equal({ size: icon.bytes.length, bytes: null, fresh: true });
      expect([...bucket.objects.keys()]).to.deep.equal([icon.sha256]);
      expect(bucket.objects.get(icon.sha256)!.equals(icon.bytes)).to.equal(true);
      expect((await bucketed.read(icon.sha256))!.equals(icon.bytes)).to.equal(true);
      // The database store does not serve what a bucket holds.
      expect(await store.read(icon.sha256)).to.equal(undefined);
    });

    it('reads through its cache: once per icon, concurrent reads shared, misses never kept, a pruned icon dropped', async () => {
      const real = databaseRows();
      let reads = 0;
      const counting: IconRows = {
        record: (tx, icon, withBytes) => real.record(tx, icon, withBytes),
        bytes: (key) => {
          reads += 1;
          return real.bytes(key);
        },
        prune: (options, removing) => real.prune(options, removing),
        release: (tx, from, keep) => real.release(tx, from, keep),
        transaction: (work) => real.transaction(work),
      };
      const cached = new IconStore(counting, () => base);
      const icon = await cached.parse(png(5, 5, { color: [10, 20, 30] }).toString('base64'), 'create', FIELD, sender());
      await cached.saveAlone(icon);

      const first = await Promise.all([1, 2, 3].map(() => cached.read(icon.sha256)));
      expect(first.every((bytes) => bytes!.equals(icon.bytes))).to.equal(true);
      expect(reads).to.equal(1);
      expect((await cached.read(icon.sha256))!.equals(icon.bytes)).to.equal(true);
      expect(reads).to.equal(1);

      const missing = sha256(randomBytes(16));
      expect(await cached.read(missing)).to.equal(undefined);
      expect(await cached.read(missing)).to.equal(undefined);
      expect(reads).to.equal(3);

      await sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [icon.sha256]);
      const pruned = await cached.prune({ graceMs: 3_600_000, batchSize: 100, maxBatches: 100, stopping: () => false });
      expect(pruned).to.be.at.least(1);
      expect(await iconRow(icon.sha256)).to.equal(undefined);
      expect(await cached.read(icon.sha256)).to.equal(undefined);
      expect(reads).to.equal(4);
    });

    it('shows an icon at the CDN base read at each call, and null for no icon', () => {
      const key = sha256(png(1, 1));
      expect(store.url(key)).to.equal(`http://cdn.test/cdn/icons/${key}.png`);
      base = 'https://cdn.example.com';
      expect(store.url(key)).to.equal(`https://cdn.example.com/icons/${key}.png`);
      expect(store.url(null)).to.equal(null);
      expect(store.url(undefined)).to.equal(null);
    });

    it('takes only 64 lower-case hex characters as a key', async () => {
      const key = sha256(png(1, 1));
      for (const bad of ['../x', key.toUpperCase(), `${key}/../${key}`, key.slice(1), '']) {
        expect(() => store.url(bad)).to.throw();
        for (const attempt of [store.read(bad), store.saveAlone({ bytes: png(1, 1), sha256: bad })]) {
          expect(
            await attempt.then(
              () => 'accepted',
              () => 'refused',
            ),
            bad,
          ).to.equal('refused');
        }
      }
      expect(await storedIcons()).to.equal(storedBefore);
    });
  });

  describe('the read cache', () => {
    const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);

    it('holds at most its bytes, dropping the least recently used first', () => {
      const cache = new IconCache(10);
      cache.set('a', bytes(4, 1));
      cache.set('b', bytes(4, 2));
      expect(cache.get('a')![0]).to.equal(1); // a is now the most recently used
      cache.set('c', bytes(4, 3));
      expect([cache.get('a')?.[0], cache.get('b'), cache.get('c')?.[0]]).to.deep.equal([1, undefined, 3]);
      expect(cache.bytes).to.equal(8);
      cache.set('d', bytes(10, 4));
      expect([cache.get('a'), cache.get('c'), cache.get('d')?.[0]]).to.deep.equal([undefined, undefined, 4]);
      expect(cache.bytes).to.equal(10);
    });

    it('keeps nothing larger than itself, and forgets a deleted key', () => {
      const cache = new IconCache(10);
      cache.set('a', bytes(3, 1));
      cache.set('big', bytes(11, 2));
      expect([cache.get('a')?.[0], cache.get('big')]).to.deep.equal([1, undefined]);
      cache.set('a', bytes(5, 3));
      expect(cache.bytes).to.equal(5);
      cache.delete('a');
      cache.delete('never');
      expect([cache.get('a'), cache.bytes]).to.deep.equal([undefined, 0]);
    });
  });

  describe('a bucket that cannot be reached', () => {
    const UNREACHABLE = { code: 'unavailable', message: 'The icon could not be stored right now; nothing was changed. Retry later.' };

    it('answers a save with 503 unavailable and Retry-After within its bound, recording nothing', async () => {
      const failing = new IconStore(databaseRows(), () => base, { bucket: await unreachableBucket() });
      const icon = await failing.parse(png(6, 6).toString('base64'), 'create', FIELD, sender());
      const started = Date.now();
      const failure = await failing.saveAlone(icon).catch((error: unknown) => error);
      expect(Date.now() - started).to.be.below(2_000);
      expect(asAnswer(failure)).to.deep.equal({
        status: 503,
        headers: { 'Retry-After': '30' },
        body: { success: false, error: UNREACHABLE },
      });
      expect(await iconRow(icon.sha256)).to.equal(undefined);
      const unread = await failing.read(icon.sha256).catch((error: unknown) => error);
      expect(asAnswer(unread)).to.deep.equal({
        status: 503,
        headers: { 'Retry-After': '5' },
        body: { success: false, error: { code: 'unavailable', message: 'The icon could not be read right now; retry later.' } },
      });
    });

    describe('through the project domain, behind the envelope', () => {
      let user: TestUser;
      let server: http.Server;
      let url: string;
      let change: (owner: User) => Promise<unknown>;
      let failing: IconStore;
      let projects: Projects;

      /** The owner's own session acting in `em`, as a handler's context would be. */
      const asOwner = (em: Scope['em'], owner: User): Scope => ({
        em,
        caller: { user: owner, userId: owner.id, username: owner.username, kind: 'session', credentialId: 'unused', grant: UNLIMITED },
      });

      before(async () => {
        user = await signUp();
        failing = new IconStore(databaseRows(), () => 'http://cdn.test/cdn', { bucket: await unreachableBucket() });
        // The icon store fails before anything is queued for webhooks or billed: neither is ever reached.
        const unreached = () => expect.fail('a refused change reached webhooks or billing');
        const shapes = { member: unreached, project: unreached, insight: unreached, event: unreached };
        const billing = { cancelSubscription: unreached, assertWebhookOn: unreached, verifyEvent: unreached };
        projects = new Projects({ icons: failing, billing, limits: loadConfig().limits, shapes });
        const app = new Koa();
        app.silent = true;
        app.use(envelope());
        app.use(async (ctx) => {
          const owner = await database().orm.em.fork().findOneOrFail(User, { id: user.id });
          ctx.state.reply = { status: 200, data: await change(owner) };
        });
        server = app.listen(0, '127.0.0.1');
        await new Promise((resolve) => server.once('listening', resolve));
        url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      });
      after(() => new Promise((resolve) => server.close(resolve)));

      /** A project's fields and how many activity records it has. */
      const PROJECT_STATE = `select p.name, p.namespace, p.icon,
        (select count(*)::int from activity a where a.project_id = p.id) as activity from projects p where p.id = ?`;

      async function expectUnreachable(): Promise<void> {
        const answer = await fetch(url, { method: 'POST' });
        expect(answer.status).to.equal(503);
        expect(answer.headers.get('retry-after')).to.equal('30');
        expect(await answer.json()).to.deep.equal({ success: false, error: UNREACHABLE });
      }

      it('a project created with an icon: 503, no project, no icon recorded', async () => {
        const namespace = namespaceName();
        const sent = png(5, 5, { color: [5, 5, 5] });
        const icon = DATA_URL + sent.toString('base64');
        change = (owner) => projects.create(asOwner(database().orm.em.fork(), owner), { name: 'Full', namespace, icon });
        await expectUnreachable();
        expect(await sql('select id from projects where namespace = ?', [namespace])).to.deep.equal([]);
        expect(await iconRow(sha256(storedIcon(sent)))).to.equal(undefined);
        expect(await storedIcons()).to.equal(storedBefore);
      });

      it('a project renamed and re-iconed: 503, nothing changed, no activity recorded, no icon recorded', async () => {
        const project = await createProject(user.token);
        const before = await sql(PROJECT_STATE, [project.id]);
        const sent = png(7, 7);
        change = async (owner) => {
          const em = database().orm.em.fork();
          const row = await em.findOneOrFail(Project, { id: project.id });
          return projects.change(asOwner(em, owner), row, { name: 'Renamed', icon: DATA_URL + sent.toString('base64') });
        };
        await expectUnreachable();
        expect(await sql(PROJECT_STATE, [project.id])).to.deep.equal(before);
        expect(await iconRow(sha256(storedIcon(sent)))).to.equal(undefined);
      });
    });
  });

  describe('icons an earlier release left on disk', () => {
    let root: string;
    let dir: string;

    beforeEach(() => {
      root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-disk-icons-'));
      dir = path.join(root, 'icons');
      mkdirSync(dir);
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    /** Writes `name` into the icon folder, last modified `ageMs` ago. */
    function put(name: string, bytes: Buffer | string, ageMs = 0): void {
      writeFileSync(path.join(dir, name), bytes);
      const then = new Date(Date.now() - ageMs);
      utimesSync(path.join(dir, name), then, then);
    }

    it('moves each file that is the icon its name says, leaves anything else, and removes stale temporary files', async () => {
      const [a, b, aside] = [1, 2, 3].map((i) => png(4, i, { color: [i, i, i] }));
      const other = png(3, 3);
      const text = Buffer.from('not a png at all');
      const uuid = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
      put(`${sha256(a!)}.png`, a!, 3_600_000);
      put(`${sha256(b!)}.png`, b!);
      put(`.${sha256(aside!)}.${uuid(1)}.prune`, aside!);
      put(`${sha256(png(5, 5))}.png`, other); // named after other bytes
      put(`${sha256(text)}.png`, text); // the right hash, but no PNG
      put('notes.txt', 'not an icon');
      put(`.${sha256(a!)}.${uuid(2)}.tmp`, 'half written', 5 * 60_000);
      put(`.${sha256(b!)}.${uuid(3)}.tmp`, 'being written');
      mkdirSync(path.join(dir, `${sha256(Buffer.from('a folder'))}.png`));

      const moved = await moveDiskIcons(dir, store, 60_000);
      expect({ ...moved, left: [...moved.left].sort((x, y) => x.file.localeCompare(y.file)) }).to.deep.equal({
        moved: 3,
        removed: 1,
        left: [
          { file: `${sha256(Buffer.from('a folder'))}.png`, reason: 'not a regular file' },
          { file: `${sha256(png(5, 5))}.png`, reason: 'its name is not the SHA-256 of its content' },
          { file: `${sha256(text)}.png`, reason: 'not an icon: is not a PNG image' },
          { file: 'notes.txt', reason: 'not an icon file' },
        ].sort((x, y) => x.file.localeCompare(y.file)),
      });
      expect(readdirSync(dir).sort()).to.deep.equal(
        [
          `${sha256(Buffer.from('a folder'))}.png`,
          `${sha256(png(5, 5))}.png`,
          `${sha256(text)}.png`,
          'notes.txt',
          `.${sha256(b!)}.${uuid(3)}.tmp`,
        ].sort(),
      );
      for (const bytes of [a!, b!, aside!]) {
        expect(await iconRow(sha256(bytes))).to.deep.equal({ size: bytes.length, bytes, fresh: true });
        expect((await store.read(sha256(bytes)))!.equals(bytes)).to.equal(true);
      }
      expect(await storedIcons()).to.equal(storedBefore + 3);

      // Again: nothing left to move, and what was left stays.
      expect(await moveDiskIcons(dir, store, 60_000)).to.deep.include({ moved: 0, removed: 0 });
      expect(readdirSync(dir)).to.have.length(5);
      expect(await storedIcons()).to.equal(storedBefore + 3);
    });

    it('moves the same folder from two stores at once as one, and removes the emptied folder', async () => {
      const icons = [1, 2, 3, 4, 5, 6].map((i) => png(i, 2, { color: [i * 9, 0, 0] }));
      for (const bytes of icons) put(`${sha256(bytes)}.png`, bytes);
      const other = new IconStore(databaseRows(), () => base);
      const [first, second] = await Promise.all([moveDiskIcons(dir, store, 60_000), moveDiskIcons(dir, other, 60_000)]);
      expect(first.moved + second.moved).to.be.within(6, 12);
      expect([...first.left, ...second.left]).to.deep.equal([]);
      expect(existsSync(dir)).to.equal(false);
      for (const bytes of icons) expect(await count('select count(*)::int from icons where sha256 = ?', [sha256(bytes)])).to.equal(1);
      expect(await storedIcons()).to.equal(storedBefore + 6);
      expect(await moveDiskIcons(dir, store, 60_000)).to.deep.equal({ moved: 0, removed: 0, left: [] });
    });

    it('stops at a store that fails, keeping the file for the next run', async () => {
      const bytes = png(2, 9);
      put(`${sha256(bytes)}.png`, bytes);
      const failing = new IconStore(databaseRows(), () => base, { bucket: await unreachableBucket() });
      const failure = await moveDiskIcons(dir, failing, 60_000).catch((error: unknown) => error);
      expect(failure).to.be.instanceOf(Unavailable);
      expect(readdirSync(dir)).to.deep.equal([`${sha256(bytes)}.png`]);
      expect(await iconRow(sha256(bytes))).to.equal(undefined);
    });
  });
});
