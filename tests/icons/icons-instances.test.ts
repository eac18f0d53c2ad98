/**
 * Icons across instances and stores, through running services. Two instances on one PostgreSQL
 * database, each with a data folder of its own, serve each other's icons, with the database as the
 * store and with an S3-compatible bucket (a local s3rver the test starts). With a bucket: what it
 * holds and what the database records; a bucket that refuses connections or never answers (503 in
 * the envelope within the bound, nothing changed); a replaced icon released from the bucket;
 * pruning (an unreferenced old icon leaves the bucket, a referenced and a fresh one stay); icons
 * left on disk moving into the bucket at start; and an upload racing a prune. What needs two
 * processes on one database (two instances, the races) runs on PostgreSQL only, and is skipped
 * without it, saying so; the rest runs on the embedded database as well, each service on a database
 * of its own.
 */
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import type { Database } from '../../server/src/db/orm.js';
import { DatabaseIconRows } from '../../server/src/domain/icons.js';
import { IconStore, type Icon, type IconBucket } from '../../server/src/storage/icons.js';
import { S3Bucket } from '../../server/src/storage/s3.js';
import { signUpOn, type TestUser } from '../support/accounts.js';
import { baseUrl, count, database, sha256, sql, startExtraServer, type TestServer } from '../support/harness.js';
import { callAt, expectData } from '../support/http.js';
import { expectIconServed, iconRow, rawRequest } from '../support/icons.js';
import { freePort } from '../support/pg-cluster.js';
import { png, storedIcon } from '../support/png.js';
import { namespaceName } from '../support/projects.js';
import { startLocalS3, type LocalS3 } from '../support/s3.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const DATA_URL = 'data:image/png;base64,';
const silent = pino({ level: 'silent' });
const UNSTORED = { code: 'unavailable', message: 'The icon could not be stored right now; nothing was changed. Retry later.' };
const UNREAD = { code: 'unavailable', message: 'The icon could not be read right now; retry later.' };

let colour = 0;
/** A PNG no other test sends, and what the service stores of it (its re-encoding) with its key. */
function uniqueIcon(): { sent: Buffer; stored: Buffer; key: string } {
  colour += 1;
  const sent = png(6, 4, { color: [colour % 256, (colour >> 8) % 256, 77] });
  const stored = storedIcon(sent);
  return { sent, stored, key: sha256(stored) };
}

const SECOND_INSTANCE = 'the embedded database has a single owner process, so a second instance cannot share it';
const SECOND_SESSION = 'the embedded database serves one session at a time, so a prune and a save cannot overlap';

function skipUnlessPostgres(context: Mocha.Context, why = SECOND_INSTANCE): void {
  if (database().kind === 'postgresql') return;
  console.log(`      (skipped: ${why}; run with DATABASE_URL)`);
  context.skip();
}

/** A project created through `server` with `icon` (sent as a data URL). */
async function projectWithIcon(
  server: { url: string },
  user: TestUser,
  icon: Buffer,
): Promise<{ id: string; namespace: string; icon: string }> {
  const body = { name: 'Iconic', namespace: namespaceName(), icon: DATA_URL + icon.toString('base64') };
  return expectData(await callAt(server.url, 'POST', '/v1/projects', user.token, body), 201);
}

/** The service's icon store and bucket, as a service with `env` builds them, on `db`. */
async function storeLike(env: Record<string, string>, db: Database): Promise<{ store: IconStore; bucket: S3Bucket }> {
  const icons = loadConfig(env).icons;
  if (icons.store !== 's3') throw new Error('not an s3 environment');
  const bucket = await S3Bucket.open(icons.s3, silent);
  return { bucket, store: new IconStore(new DatabaseIconRows(() => db.orm.em.fork()), () => 'http://cdn.test', { bucket }) };
}

async function closeAll(servers: (TestServer | undefined)[]): Promise<void> {
  for (const server of servers) await server?.close();
}

describe('icons across instances', function () {
  this.timeout(60_000);

  it('two instances on one PostgreSQL database, the database as the store: each serves the icon uploaded through the other', async function () {
    skipUnlessPostgres(this);
    const a = await startExtraServer(CLOSES_AT_ONCE);
    const b = await startExtraServer(CLOSES_AT_ONCE);
    try {
      expect(a.dataDir).to.not.equal(b.dataDir);
      const user = await signUpOn(a);
      const first = uniqueIcon();
      const project = await projectWithIcon(a, user, first.sent);
      expect(project.icon).to.equal(`${a.url}/cdn/icons/${first.key}.png`);
      await expectIconServed(b.url, first.key, first.stored);
      await expectIconServed(a.url, first.key, first.stored);

      // And the other way: a new icon through B, served by A and by the run's own server.
      const second = uniqueIcon();
      const changed = await callAt(b.url, 'PATCH', `/v1/projects/${project.namespace}`, user.token, {
        icon: DATA_URL + second.sent.toString('base64'),
      });
      expect(expectData(changed).icon).to.equal(`${b.url}/cdn/icons/${second.key}.png`);
      for (const origin of [a.url, baseUrl()]) await expectIconServed(origin, second.key, second.stored);

      expect(await iconRow(second.key)).to.deep.equal({ size: second.stored.length, bytes: second.stored, fresh: true });
      // No instance wrote a file: the shared database is the only place an icon lives.
      for (const dir of [a.dataDir, b.dataDir]) expect(readdirSync(dir)).to.not.include('icons');
    } finally {
      await closeAll([a, b]);
    }
  });

  describe('an S3-compatible bucket as the store', () => {
    let s3: LocalS3;

    before(async () => {
      s3 = await startLocalS3();
    });
    after(async () => {
      await s3?.close();
    });

    it('two instances on one PostgreSQL database: each serves, from the bucket, the icon uploaded through the other', async function () {
      skipUnlessPostgres(this);
      const a = await startExtraServer({ ...s3.env, ...CLOSES_AT_ONCE });
      const b = await startExtraServer({ ...s3.env, ...CLOSES_AT_ONCE });
      try {
        const user = await signUpOn(a);
        const icon = uniqueIcon();
        const project = await projectWithIcon(a, user, icon.sent);
        expect(project.icon).to.equal(`${a.url}/cdn/icons/${icon.key}.png`);

        // The bucket holds the bytes, with the headers a public bucket would serve them with;
        // the database records the icon without them.
        expect(await s3.object(`icons/${icon.key}.png`)).to.deep.equal({
          bytes: icon.stored,
          contentType: 'image/png',
          cacheControl: 'public, max-age=31536000, immutable',
        });
        expect(await iconRow(icon.key)).to.deep.equal({ size: icon.stored.length, bytes: null, fresh: true });

        await expectIconServed(b.url, icon.key, icon.stored);
        await expectIconServed(a.url, icon.key, icon.stored);

        const other = uniqueIcon();
        await callAt(b.url, 'PATCH', `/v1/projects/${project.namespace}`, user.token, { icon: DATA_URL + other.sent.toString('base64') });
        await expectIconServed(a.url, other.key, other.stored);
        // The change released the icon it replaced, which nothing else shows: from the bucket too.
        const keys = await s3.keys();
        expect(keys).to.include(`icons/${other.key}.png`).and.not.include(`icons/${icon.key}.png`);
        expect(await iconRow(icon.key)).to.equal(undefined);
        for (const dir of [a.dataDir, b.dataDir]) expect(readdirSync(dir)).to.not.include('icons');
      } finally {
        await closeAll([a, b]);
      }
    });

    describe('one instance', () => {
      let server: TestServer;
      let user: TestUser;

      before(async () => {
        server = await startExtraServer({ ...s3.env, ...CLOSES_AT_ONCE });
        user = await signUpOn(server);
      });
      after(async () => {
        await server?.close();
      });

      it('serves what the bucket holds, 404 for what it does not, and one copy however often an icon is uploaded', async () => {
        const icon = uniqueIcon();
        await projectWithIcon(server, user, icon.sent);
        await projectWithIcon(server, user, icon.sent);
        await expectIconServed(server.url, icon.key, icon.stored);
        expect((await s3.keys()).filter((key) => key === `icons/${icon.key}.png`)).to.have.length(1);
        expect(await count('select count(*)::int from icons where sha256 = ?', [icon.key], server.db)).to.equal(1);

        const missing = await rawRequest(server.url, 'GET', `/cdn/icons/${uniqueIcon().key}.png`);
        expect(missing.status).to.equal(404);
        expect(JSON.parse(missing.body.toString())).to.deep.equal({
          success: false,
          error: { code: 'not_found', message: 'Not found.' },
        });
      });

      it('pruning removes an old icon nothing refers to from the bucket and the database, and keeps a referenced and a fresh one', async () => {
        const [referenced, unreferenced, fresh] = [uniqueIcon(), uniqueIcon(), uniqueIcon()];
        await projectWithIcon(server, user, referenced.sent);
        // Each by a user of its own: a user's next icon change would release the icon they removed before.
        for (const icon of [unreferenced, fresh]) {
          const owner = await signUpOn(server);
          const project = await projectWithIcon(server, owner, icon.sent);
          expect((await callAt(server.url, 'PATCH', `/v1/projects/${project.namespace}`, owner.token, { icon: null })).status).to.equal(
            200,
          );
        }
        await sql(
          `update icons set stored_at = now() - interval '2 hours' where sha256 in (?, ?)`,
          [referenced.key, unreferenced.key],
          server.db,
        );
        await expectIconServed(server.url, unreferenced.key, unreferenced.stored);

        const { store } = await storeLike(s3.env, server.db);
        expect(await store.read(unreferenced.key)).to.deep.equal(unreferenced.stored);
        const removed = await store.prune({ graceMs: 3_600_000, batchSize: 500, maxBatches: 20, stopping: () => false });
        expect(removed).to.be.at.least(1);

        const keys = await s3.keys();
        expect(keys).to.include.members([`icons/${referenced.key}.png`, `icons/${fresh.key}.png`]);
        expect(keys).to.not.include(`icons/${unreferenced.key}.png`);
        expect(await iconRow(unreferenced.key, server.db)).to.equal(undefined);
        expect(await iconRow(referenced.key, server.db)).to.deep.include({ bytes: null });
        expect(await iconRow(fresh.key, server.db)).to.deep.include({ bytes: null, fresh: true });
        expect(await store.read(unreferenced.key), 'gone from the cache as well').to.equal(undefined);
        await expectIconServed(server.url, referenced.key, referenced.stored);
        await expectIconServed(server.url, fresh.key, fresh.stored);
      });
    });

    describe('a bucket that cannot be used', () => {
      let hanging: net.Server;
      const sockets = new Set<net.Socket>();

      before(async () => {
        // Accepts connections and never answers: a stalled service, or a network that drops packets.
        hanging = net.createServer((socket) => {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
        });
        await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
      });
      after(async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => hanging.close(resolve));
      });

      const endpoints: [string, () => Promise<string>][] = [
        ['that refuses connections', async () => `http://127.0.0.1:${await freePort()}`],
        ['that never answers', async () => `http://127.0.0.1:${(hanging.address() as net.AddressInfo).port}`],
      ];
      for (const [what, endpoint] of endpoints) {
        it(`${what}: an upload answers 503 in the envelope within S3_TIMEOUT_MS and changes nothing; a read answers 503`, async () => {
          const server = await startExtraServer({ ...s3.env, S3_ENDPOINT: await endpoint(), S3_TIMEOUT_MS: '1000', ...CLOSES_AT_ONCE });
          try {
            const user = await signUpOn(server);
            const icon = uniqueIcon();
            const namespace = namespaceName();
            const iconsBefore = await count('select count(*)::int from icons', [], server.db);

            let started = Date.now();
            const create = await callAt(server.url, 'POST', '/v1/projects', user.token, {
              name: 'Unstored',
              namespace,
              icon: DATA_URL + icon.sent.toString('base64'),
            });
            expect(Date.now() - started, 'bounded by S3_TIMEOUT_MS').to.be.below(2_500);
            expect([create.status, create.headers.get('retry-after'), create.json]).to.deep.equal([
              503,
              '30',
              { success: false, error: UNSTORED },
            ]);
            expect(await sql('select id from projects where namespace = ?', [namespace], server.db)).to.deep.equal([]);

            const plain = expectData(await callAt(server.url, 'POST', '/v1/projects', user.token, { name: 'Plain', namespace }), 201);
            const state = `select p.name, p.icon, (select count(*)::int from activity a where a.project_id = p.id) as activity
              from projects p where p.id = ?`;
            const before = await sql(state, [plain.id], server.db);
            const update = await callAt(server.url, 'PATCH', `/v1/projects/${namespace}`, user.token, {
              name: 'Renamed',
              icon: DATA_URL + icon.sent.toString('base64'),
            });
            expect([update.status, update.json]).to.deep.equal([503, { success: false, error: UNSTORED }]);
            expect(await sql(state, [plain.id], server.db)).to.deep.equal(before);
            expect(await iconRow(icon.key, server.db)).to.equal(undefined);
            expect(await count('select count(*)::int from icons', [], server.db)).to.equal(iconsBefore);

            started = Date.now();
            const read = await rawRequest(server.url, 'GET', `/cdn/icons/${icon.key}.png`);
            expect(Date.now() - started).to.be.below(2_500);
            expect([read.status, read.headers['retry-after'], JSON.parse(read.body.toString())]).to.deep.equal([
              503,
              '5',
              { success: false, error: UNREAD },
            ]);
          } finally {
            await server.close();
          }
        });
      }
    });

    it('moves icons left in DATA_DIR/icons into the bucket at start, and leaves a file that is not what its name says', async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-test-disk-'));
      const iconDir = path.join(dataDir, 'icons');
      mkdirSync(iconDir);
      const [kept, aside] = [uniqueIcon(), uniqueIcon()];
      const wrong = uniqueIcon();
      writeFileSync(path.join(iconDir, `${kept.key}.png`), kept.stored);
      writeFileSync(path.join(iconDir, `.${aside.key}.00000000-0000-4000-8000-000000000001.prune`), aside.stored);
      writeFileSync(path.join(iconDir, `${wrong.key}.png`), kept.stored);
      const server = await startExtraServer({ ...s3.env, ...CLOSES_AT_ONCE }, dataDir);
      try {
        expect(readdirSync(iconDir)).to.deep.equal([`${wrong.key}.png`]);
        expect(await s3.keys()).to.include.members([`icons/${kept.key}.png`, `icons/${aside.key}.png`]);
        expect(await s3.keys()).to.not.include(`icons/${wrong.key}.png`);
        for (const icon of [kept, aside]) {
          expect(await iconRow(icon.key, server.db)).to.deep.equal({ size: icon.stored.length, bytes: null, fresh: true });
          await expectIconServed(server.url, icon.key, icon.stored);
        }
        expect((await rawRequest(server.url, 'GET', `/cdn/icons/${wrong.key}.png`)).status).to.equal(404);
      } finally {
        await server.close();
      }
    });

    describe('an upload racing a prune (PostgreSQL)', () => {
      /** A bucket whose deletes wait for `release()`, around the real one. */
      class GatedBucket implements IconBucket {
        private opened!: () => void;
        readonly gate = new Promise<void>((resolve) => (this.opened = resolve));
        deleting = false;

        constructor(private readonly bucket: S3Bucket) {}

        put(icon: Icon): Promise<void> {
          return this.bucket.put(icon);
        }

        get(key: string): Promise<Buffer | undefined> {
          return this.bucket.get(key);
        }

        async delete(keys: string[]): Promise<void> {
          this.deleting = true;
          await this.gate;
          await this.bucket.delete(keys);
        }

        release(): void {
          this.opened();
        }
      }

      async function waitFor(condition: () => boolean): Promise<void> {
        for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(condition()).to.equal(true);
      }

      it('a save of an icon a prune is removing waits for the prune, then stores the icon anew', async function () {
        skipUnlessPostgres(this, SECOND_SESSION);
        const { store, bucket } = await storeLike(s3.env, database());
        const icon = uniqueIcon();
        await store.saveAlone({ bytes: icon.stored, sha256: icon.key });
        await sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [icon.key]);

        const gated = new GatedBucket(bucket);
        const pruner = new IconStore(new DatabaseIconRows(() => database().orm.em.fork()), () => 'unused', { bucket: gated });
        const pruning = pruner.prune({ graceMs: 3_600_000, batchSize: 500, maxBatches: 1, stopping: () => false });
        await waitFor(() => gated.deleting); // the prune holds the row, deleted but not committed

        let saved = false;
        const saving = store.saveAlone({ bytes: icon.stored, sha256: icon.key }).then(() => (saved = true));
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(saved, 'the save waits for the prune').to.equal(false);
        gated.release();
        expect(await pruning).to.be.at.least(1);
        await saving;

        expect(await iconRow(icon.key)).to.deep.equal({ size: icon.stored.length, bytes: null, fresh: true });
        expect(await s3.object(`icons/${icon.key}.png`)).to.deep.include({ bytes: icon.stored });
      });

      it('a prune passes over an icon whose saving transaction has not committed, however old its row', async function () {
        skipUnlessPostgres(this, SECOND_SESSION);
        const { store } = await storeLike(s3.env, database());
        const icon = uniqueIcon();
        await store.saveAlone({ bytes: icon.stored, sha256: icon.key });
        await sql(`update icons set stored_at = now() - interval '2 hours' where sha256 = ?`, [icon.key]);

        const rows = new DatabaseIconRows(() => database().orm.em.fork());
        await rows.transaction(async (tx) => {
          await store.save(tx, { bytes: icon.stored, sha256: icon.key });
          // Another connection prunes meanwhile: the row is locked by this transaction, and skipped.
          await store.prune({ graceMs: 3_600_000, batchSize: 500, maxBatches: 1, stopping: () => false });
          expect(await s3.keys()).to.include(`icons/${icon.key}.png`);
        });
        expect(await iconRow(icon.key)).to.deep.equal({ size: icon.stored.length, bytes: null, fresh: true });
        expect(await s3.object(`icons/${icon.key}.png`)).to.deep.include({ bytes: icon.stored });
      });
    });
  });
});
