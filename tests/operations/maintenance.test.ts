/**
 * Background maintenance: pruning icons nothing refers to, `stripe_events` rows past their
 * retention and events past EVENT_RETENTION_DAYS (bounded, one instance at a time, never an event
 * newer than the cutoff), moving icon files left on disk into the store at start, and failures
 * that are logged and never stop the service. Runs on the run's database, with the database as
 * the icon store (the bucket's pruning is in icons-instances.test.ts).
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { v7 } from 'uuid';
import { loadConfig } from '../../server/src/config.js';
import type { Database } from '../../server/src/db/orm.js';
import { DatabaseIconRows } from '../../server/src/domain/icons.js';
import { deleteEventsStoredBefore, firstUuidV7At } from '../../server/src/domain/retention.js';
import { Maintenance, MAINTENANCE_DEFAULTS, type MaintenanceOptions } from '../../server/src/maintenance/prune.js';
import { startServer } from '../../server/src/server.js';
import { IconStore } from '../../server/src/storage/icons.js';
import { count, database, sha256, sql, startExtraServer } from '../support/harness.js';
import { png } from '../support/png.js';
import { signUp } from '../support/accounts.js';
import { call, DAY_MS, expectData } from '../support/http.js';
import { createProject } from '../support/projects.js';

const HOUR_MS = 3_600_000;
const silent = pino({ level: 'silent' });

/** A random icon key: the SHA-256 the store names icons by. */
function key(): string {
  return sha256(randomBytes(16));
}

/** An icon store on `db`'s rows, as the service builds it with the database as the store. */
function storeOn(db: Database): IconStore {
  return new IconStore(new DatabaseIconRows(() => db.orm.em.fork()), () => 'http://cdn.test');
}

function clientUrl(db: Database): string | undefined {
  return db.kind === 'postgresql' ? db.orm.config.get('clientUrl') : undefined;
}

function maintenanceOn(
  db: Database,
  icons: IconStore,
  options: Partial<MaintenanceOptions> = {},
  env: NodeJS.ProcessEnv = {},
): Maintenance {
  const config = { ...loadConfig({ ...env, DATABASE_URL: clientUrl(db) ?? '' }), dataDir: root };
  return new Maintenance(db, icons, silent, config, { ...MAINTENANCE_DEFAULTS, ...options });
}

/** A UUID v7 of millisecond `ms` (its first 48 bits), the rest random but for the version and variant bits. */
function uuidV7At(ms: number): string {
  const random = randomBytes(10).toString('hex');
  const variant = (8 + (parseInt(random[3]!, 16) & 3)).toString(16);
  const hex = `${ms.toString(16).padStart(12, '0')}7${random.slice(0, 3)}${variant}${random.slice(4, 19)}`;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A data folder of the test's own: maintenance moves `<root>/icons` into the store. */
let root: string;

describe('maintenance', () => {
  let icons: IconStore;

  beforeEach(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-maintenance-'));
    icons = storeOn(database());
    // Icons other tests left: each test here counts its own.
    await sql('delete from icons');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** A stored icon (random bytes under a random key), last stored `ageMs` ago. */
  async function storedIcon(ageMs: number, db: Database = database()): Promise<string> {
    const name = key();
    await sql(
      `insert into icons (sha256, size, bytes, stored_at) values (?, 16, ?, now() - ?::float8 * interval '1 millisecond')`,
      [name, randomBytes(16), ageMs],
      db,
    );
    return name;
  }

  /** The keys of the stored icons, sorted. */
  async function storedKeys(): Promise<string[]> {
    return (await sql<{ sha256: string }>('select sha256 from icons order by sha256')).map((row) => row.sha256);
  }

  async function insertStripeEvents(ageMs: number, n: number): Promise<string[]> {
    const ids = Array.from({ length: n }, () => `evt_${randomBytes(8).toString('hex')}`);
    const receivedAt = new Date(Date.now() - ageMs);
    for (const id of ids) await sql('insert into stripe_events (id, type, received_at) values (?, ?, ?)', [id, 'test.event', receivedAt]);
    return ids;
  }

  /** Which of these ids `stripe_events` holds (the harness's `sql` spreads an array into a list). */
  async function storedEvents(ids: string[]): Promise<string[]> {
    return (await sql<{ id: string }>('select id from stripe_events where id in (?) order by id', [ids])).map((row) => row.id);
  }

  it('removes an old icon nothing refers to, in batches; keeps referenced, fresh and just-saved ones', async () => {
    const owner = await signUp();
    const project = await createProject(owner.token);
    const [byProject, byUser, saved] = await Promise.all([1, 2, 3].map(() => storedIcon(2 * HOUR_MS)));
    const fresh = await storedIcon(30 * 60_000);
    const orphans: string[] = [];
    for (let i = 0; i < 5; i++) orphans.push(await storedIcon(2 * HOUR_MS));
    await sql('update projects set icon = ? where id = ?', [byProject, project.id]);
    await sql('update users set icon = ? where id = ?', [byUser, owner.id]);
    // A transaction now refers to this stored copy: saving it again marks it as just used.
    await icons.saveAlone({ bytes: randomBytes(16), sha256: saved! });
    for (const orphan of orphans) expect(await icons.read(orphan)).to.have.length(16); // now cached too

    const report = await maintenanceOn(database(), icons, { batchSize: 2 }).pruneOnce();
    expect(report).to.deep.equal({ ran: true, icons: 5, stripeEvents: 0, idempotencyKeys: 0, events: 0, webhookDeliveries: 0 });
    expect(await storedKeys()).to.deep.equal([byProject, byUser, fresh, saved].sort());
    for (const orphan of orphans) expect(await icons.read(orphan), 'gone from the cache too').to.equal(undefined);
    await sql('update users set icon = null where id = ?', [owner.id]);
  });

  it('removes at most batchSize × maxBatches icons a run, oldest first; the next run goes on', async () => {
    const ages = [7, 6, 5, 4, 3, 2, 0.5].map((hours) => hours * HOUR_MS);
    const keys: string[] = [];
    for (const age of ages) keys.push(await storedIcon(age));
    const maintenance = maintenanceOn(database(), icons, { batchSize: 2, maxBatches: 2 });
    expect(await maintenance.pruneOnce()).to.deep.equal({
      ran: true,
      icons: 4,
      stripeEvents: 0,
      idempotencyKeys: 0,
      events: 0,
      webhookDeliveries: 0,
    });
    expect(await storedKeys()).to.deep.equal(keys.slice(4).sort());
    expect(await maintenance.pruneOnce()).to.deep.equal({
      ran: true,
      icons: 2,
      stripeEvents: 0,
      idempotencyKeys: 0,
      events: 0,
      webhookDeliveries: 0,
    });
    expect(await storedKeys()).to.deep.equal([keys[6]]); // half an hour old: within the grace period
    expect(await maintenanceOn(database(), icons, { iconGraceMs: 10 * 60_000 }).pruneOnce()).to.deep.equal({
      ran: true,
      icons: 1,
      stripeEvents: 0,
      idempotencyKeys: 0,
      events: 0,
      webhookDeliveries: 0,
    });
  });

  it('removes stripe_events rows older than the retention in bounded batches, and keeps recent ones', async () => {
    const old = await insertStripeEvents(31 * DAY_MS, 5);
    const recent = await insertStripeEvents(29 * DAY_MS, 2);
    const maintenance = maintenanceOn(database(), icons, { batchSize: 2, maxBatches: 2 });
    expect(await maintenance.pruneOnce()).to.deep.equal({
      ran: true,
      icons: 0,
      stripeEvents: 4,
      idempotencyKeys: 0,
      events: 0,
      webhookDeliveries: 0,
    });
    expect(await storedEvents(old)).to.have.length(1);
    expect(await maintenance.pruneOnce()).to.deep.equal({
      ran: true,
      icons: 0,
      stripeEvents: 1,
      idempotencyKeys: 0,
      events: 0,
      webhookDeliveries: 0,
    });
    expect(await storedEvents([...old, ...recent])).to.deep.equal([...recent].sort());
    await sql('delete from stripe_events where id in (?)', [recent]);
  });

  it('removes webhook deliveries settled more than a week ago, and keeps pending and recent ones', async () => {
    const owner = await signUp();
    const project = await createProject(owner.token);
    const endpoint = expectData(
      await call('POST', `/v1/projects/${project.namespace}/webhooks`, owner.token, { url: 'https://hooks.invalid/x', enabled: false }),
      201,
    );
    const insert = (state: string, ageMs: number) =>
      sql<{ id: string }>(
        // Ids are UUID v7 of when each was queued, as the service makes them: pruning goes by id.
        `insert into webhook_deliveries (id, endpoint_id, type, payload, state, next_attempt_at, created_at)
         values (?, ?, 'project.updated', '{}', ?, case when ? = 'pending' then now() end, now() - ? * interval '1 millisecond') returning id`,
        [v7({ msecs: Date.now() - ageMs }), endpoint.id, state, state, ageMs],
      ).then(([row]) => row!.id);
    const old = [await insert('delivered', 8 * DAY_MS), await insert('failed', 8 * DAY_MS), await insert('delivered', 9 * DAY_MS)];
    const kept = [await insert('pending', 8 * DAY_MS), await insert('delivered', 6 * DAY_MS)];
    const report = await maintenanceOn(database(), icons).pruneOnce();
    expect(report.webhookDeliveries).to.equal(old.length);
    const left = await sql<{ id: string }>('select id from webhook_deliveries where endpoint_id = ? order by id', [endpoint.id]);
    expect(left.map((r) => r.id)).to.deep.equal([...kept].sort());
    await sql('delete from webhook_endpoints where id = ?', [endpoint.id]);
  });

  describe('events past EVENT_RETENTION_DAYS', () => {
    let project: { id: string };
    let feedId: string;

    before(async () => {
      const owner = await signUp();
      project = await createProject(owner.token);
      [{ id: feedId }] = (await sql<{ id: string }>(`select id from feeds where project_id = ? and name = 'general'`, [project.id])) as [
        { id: string },
      ];
    });
    afterEach(() => sql('delete from events where project_id = ?', [project.id]));

    /** Events of the test's project stored `ageMs` ago, 1 ms apart (oldest first), each with a UUID v7 of its storage time. */
    async function insertEvents(ageMs: number, n: number): Promise<string[]> {
      const start = Date.now() - ageMs;
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const id = uuidV7At(start + i);
        ids.push(id);
        await sql(`insert into events (id, project_id, feed_id, event, tags, timestamp, created_at) values (?, ?, ?, 'old', '{}', ?, ?)`, [
          id,
          project.id,
          feedId,
          new Date(start + i),
          new Date(start + i),
        ]);
      }
      return ids;
    }

    async function storedEventIds(): Promise<string[]> {
      return (await sql<{ id: string }>('select id from events where project_id = ? order by id', [project.id])).map((row) => row.id);
    }

    it('asks for the events table to be vacuumed once 1 % of it is dead (retention leaves a day of dead rows a day), and a run may delete a million', async () => {
      const [table] = await sql<{ options: string[] | null }>(`select reloptions as options from pg_class where relname = 'events'`);
      expect(table!.options).to.deep.equal(['autovacuum_vacuum_scale_factor=0.01']);
      expect(MAINTENANCE_DEFAULTS.eventBatchSize * MAINTENANCE_DEFAULTS.eventMaxBatches).to.equal(1_000_000);
    });

    it('deletes events stored before the retention, oldest first, at most eventBatchSize × eventMaxBatches a run; keeps recent ones', async () => {
      const old = await insertEvents(91 * DAY_MS, 5);
      const recent = [...(await insertEvents(89 * DAY_MS, 2)), ...(await insertEvents(60_000, 1))];
      const maintenance = maintenanceOn(database(), icons, { eventBatchSize: 2, eventMaxBatches: 2, eventBatchPauseMs: 1 });
      expect(await maintenance.pruneOnce()).to.deep.equal({
        ran: true,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 4,
        webhookDeliveries: 0,
      });
      expect(await storedEventIds()).to.deep.equal([old[4], ...recent]);
      expect(await maintenance.pruneOnce()).to.deep.equal({
        ran: true,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 1,
        webhookDeliveries: 0,
      });
      expect(await storedEventIds()).to.deep.equal(recent);
      expect(await maintenance.pruneOnce()).to.deep.equal({
        ran: true,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 0,
        webhookDeliveries: 0,
      });
    });

    it('follows EVENT_RETENTION_DAYS, and keeps every event with 0', async () => {
      const ancient = await insertEvents(40 * 365 * DAY_MS, 2);
      const week = await insertEvents(8 * DAY_MS, 2);
      const kept = maintenanceOn(database(), icons, {}, { EVENT_RETENTION_DAYS: '0' });
      expect(await kept.pruneOnce()).to.deep.equal({
        ran: true,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 0,
        webhookDeliveries: 0,
      });
      expect(await storedEventIds()).to.deep.equal([...ancient, ...week]);
      const weekly = maintenanceOn(database(), icons, {}, { EVENT_RETENTION_DAYS: '7' });
      expect(await weekly.pruneOnce()).to.deep.equal({
        ran: true,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 4,
        webhookDeliveries: 0,
      });
      expect(await storedEventIds()).to.deep.equal([]);
    });

    it('never deletes an event stored at or after the cutoff, among many on either side of it', async () => {
      const cutoff = new Date(Date.now() - 400 * DAY_MS);
      const ms = cutoff.getTime();
      // 1,500 events a millisecond apart on each side of the cutoff, several in the same millisecond
      // (random ids), and the extremes: the largest id of the millisecond before, the smallest of the cutoff's.
      const insert = `insert into events (id, project_id, feed_id, event, tags, timestamp, created_at)
        select (lpad(to_hex(t), 12, '0') || '7' || substr(h, 1, 3) || '9' || substr(h, 4, 15))::uuid, ?::uuid, ?::uuid, 'e', '{}',
          to_timestamp(t / 1000.0), to_timestamp(t / 1000.0)
        from (select ?::bigint + floor(i / 3.0)::bigint as t, md5(random()::text) as h from generate_series(?::int, ?::int) i) s`;
      await sql(insert, [project.id, feedId, ms, -1500, 1499]);
      const edge = `insert into events (id, project_id, feed_id, event, tags, timestamp, created_at) values (?, ?, ?, 'edge', '{}', ?, ?)`;
      const lastBefore = `${firstUuidV7At(new Date(ms - 1)).slice(0, 14)}7fff-bfff-ffffffffffff`;
      await sql(edge, [lastBefore, project.id, feedId, new Date(ms - 1), new Date(ms - 1)]);
      await sql(edge, [firstUuidV7At(cutoff), project.id, feedId, cutoff, cutoff]);
      const before = await count('select count(*)::int from events where project_id = ? and created_at < ?', [project.id, cutoff]);
      const after = await count('select count(*)::int from events where project_id = ? and created_at >= ?', [project.id, cutoff]);
      expect([before, after]).to.deep.equal([1501, 1501]);

      const batches = { batchSize: 400, maxBatches: 100, stopping: () => false };
      expect(await deleteEventsStoredBefore(database().orm.em.fork(), cutoff, batches)).to.equal(before);
      expect(await count('select count(*)::int from events where project_id = ? and created_at < ?', [project.id, cutoff])).to.equal(0);
      expect(await count('select count(*)::int from events where project_id = ? and created_at >= ?', [project.id, cutoff])).to.equal(
        after,
      );
      expect(await count('select count(*)::int from events where id = ?', [firstUuidV7At(cutoff)])).to.equal(1);
    });

    it('stops between batches once the service is stopping', async () => {
      await insertEvents(91 * DAY_MS, 5);
      let asked = 0;
      const batches = { batchSize: 2, maxBatches: 10, stopping: () => asked++ >= 1 };
      const cutoff = new Date(Date.now() - 90 * DAY_MS);
      expect(await deleteEventsStoredBefore(database().orm.em.fork(), cutoff, batches)).to.equal(2);
      expect(await storedEventIds()).to.have.length(3);
    });
  });

  it('runs one prune at a time in an instance: of two concurrent calls, one skips', async () => {
    await storedIcon(2 * HOUR_MS);
    const maintenance = maintenanceOn(database(), icons);
    const reports = await Promise.all([maintenance.pruneOnce(), maintenance.pruneOnce()]);
    expect(reports).to.deep.equal([
      { ran: true, icons: 1, stripeEvents: 0, idempotencyKeys: 0, events: 0, webhookDeliveries: 0 },
      { ran: false, icons: 0, stripeEvents: 0, idempotencyKeys: 0, events: 0, webhookDeliveries: 0 },
    ]);
  });

  it('on PostgreSQL, runs one prune at a time across instances: another instance skips while one runs', async function () {
    if (database().kind !== 'postgresql') this.skip(); // an embedded database has one owning process
    const extra = await startExtraServer();
    const blocker = new pg.Client({ connectionString: clientUrl(database()) });
    await blocker.connect();
    try {
      const [old] = await insertStripeEvents(31 * DAY_MS, 1);
      const orphan = await storedIcon(2 * HOUR_MS);
      // Holding the old row keeps the first instance's run (and its lock) under way.
      await blocker.query('begin');
      await blocker.query('select id from stripe_events where id = $1 for update', [old]);
      const first = maintenanceOn(database(), icons).pruneOnce();
      await waitFor('the first run to hold the lock', async () => {
        const held = `select count(*)::int as n from pg_locks where locktype = 'advisory' and classid = $1 and objid = 1 and granted`;
        const { rows } = await blocker.query(held, [0x5b1f]);
        return rows[0].n === 1;
      });
      const otherIcons = storeOn(extra.db);
      expect(await maintenanceOn(extra.db, otherIcons).pruneOnce()).to.deep.equal({
        ran: false,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 0,
        webhookDeliveries: 0,
      });
      await blocker.query('commit');
      expect(await first).to.deep.equal({ ran: true, icons: 1, stripeEvents: 1, idempotencyKeys: 0, events: 0, webhookDeliveries: 0 });
      expect(await storedKeys()).to.not.include(orphan);
      // The lock went with the run: the other instance runs now.
      expect(await maintenanceOn(extra.db, otherIcons).pruneOnce()).to.deep.equal({
        ran: true,
        icons: 0,
        stripeEvents: 0,
        idempotencyKeys: 0,
        events: 0,
        webhookDeliveries: 0,
      });
    } finally {
      await blocker.end();
      await extra.close();
    }
  });

  it('logs a failed scheduled run as a warning and keeps running', async () => {
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line).msg) });
    const broken = {
      kind: 'embedded',
      orm: {
        em: {
          fork: () => {
            throw new Error('database gone');
          },
        },
      },
    } as unknown as Database;
    const options = { ...MAINTENANCE_DEFAULTS, intervalMs: 10 };
    const maintenance = await new Maintenance(broken, icons, logger, { ...loadConfig({}), dataDir: root }, options).start();
    await waitFor('two failed runs', () => warnings.filter((msg) => msg === 'pruning failed').length >= 2);
    await maintenance.stop();
    expect(await maintenance.pruneOnce()).to.deep.equal({
      ran: false,
      icons: 0,
      stripeEvents: 0,
      idempotencyKeys: 0,
      events: 0,
      webhookDeliveries: 0,
    });
  });

  it('moves icon files left on disk into the store when the service starts, and again before each run', async function () {
    this.timeout(60_000);
    const dataDir = path.join(root, 'data');
    const iconDir = path.join(dataDir, 'icons');
    mkdirSync(iconDir, { recursive: true });
    const first = png(3, 4, { color: [3, 4, 5] });
    const later = png(4, 3, { color: [5, 4, 3] });
    const stale = `.${sha256(first)}.00000000-0000-4000-8000-000000000001.tmp`;
    const fresh = `.${sha256(first)}.00000000-0000-4000-8000-000000000002.tmp`;
    writeFileSync(path.join(iconDir, `${sha256(first)}.png`), first);
    writeFileSync(path.join(iconDir, `${sha256(later)}.png`), 'not what its name says');
    for (const name of [stale, fresh]) writeFileSync(path.join(iconDir, name), name);
    const fiveMinutesAgo = new Date(Date.now() - 5 * 60_000);
    utimesSync(path.join(iconDir, stale), fiveMinutesAgo, fiveMinutesAgo);

    const lines: { msg: string; [key: string]: unknown }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const config = { ...loadConfig({ DATABASE_URL: clientUrl(database()) ?? '' }), port: 0, host: '127.0.0.1', dataDir };
    const server = await startServer(config, logger);
    try {
      // Moved before the service listened.
      expect(readdirSync(iconDir).sort()).to.deep.equal([fresh, `${sha256(later)}.png`].sort());
      const served = await fetch(`${server.url}/cdn/icons/${sha256(first)}.png`);
      expect(served.status).to.equal(200);
      expect(Buffer.from(await served.arrayBuffer()).equals(first)).to.equal(true);
      expect(lines.find((line) => line.msg === 'icons moved from disk into the icon store')).to.deep.include({
        moved: 1,
        removed: 1,
        dir: iconDir,
      });
      expect(
        lines.filter((line) => line.msg === 'file left in the icon folder').map(({ file, reason }) => ({ file, reason })),
      ).to.deep.equal([{ file: `${sha256(later)}.png`, reason: 'its name is not the SHA-256 of its content' }]);

      // A file that appears later (an instance of the earlier release still writing to a shared
      // folder) moves at the next run; a file left in place is reported once.
      writeFileSync(path.join(iconDir, `${sha256(later)}.png`), later);
      writeFileSync(path.join(iconDir, 'notes.txt'), 'not an icon');
      lines.length = 0;
      const maintenance = new Maintenance(server.db, storeOn(server.db), logger, config, MAINTENANCE_DEFAULTS);
      await maintenance.moveDiskIcons();
      await maintenance.moveDiskIcons();
      expect(readdirSync(iconDir).sort()).to.deep.equal([fresh, 'notes.txt'].sort());
      const moved = await fetch(`${server.url}/cdn/icons/${sha256(later)}.png`);
      expect(moved.status).to.equal(200);
      expect(Buffer.from(await moved.arrayBuffer()).equals(later)).to.equal(true);
      const about = lines.filter((line) => line.msg !== 'request');
      expect(about.map(({ msg, moved: n, file, reason }) => ({ msg, moved: n, file, reason }))).to.deep.equal([
        { msg: 'icons moved from disk into the icon store', moved: 1, file: undefined, reason: undefined },
        { msg: 'file left in the icon folder', moved: undefined, file: 'notes.txt', reason: 'not an icon file' },
      ]);
    } finally {
      await server.close();
    }
  });
});
