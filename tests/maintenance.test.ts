/**
 * Background maintenance: pruning icon files nothing refers to, `stripe_events` rows past their
 * retention and events past EVENT_RETENTION_DAYS (bounded, one instance at a time, never an event
 * newer than the cutoff), the sweep of temporary icon files at start, and failures that are logged
 * and never stop the service. Runs on the run's database; the icon folders are the test's own.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { loadConfig } from '../server/src/config.js';
import type { Database } from '../server/src/db/orm.js';
import { deleteEventsStoredBefore, firstUuidV7At } from '../server/src/domain/retention.js';
import { Maintenance, MAINTENANCE_DEFAULTS, type MaintenanceOptions } from '../server/src/maintenance/prune.js';
import { startServer } from '../server/src/server.js';
import { IconStore } from '../server/src/storage/icons.js';
import { count, database, sha256, sql, startExtraServer } from './support/harness.js';
import { signUp } from './support/accounts.js';
import { DAY_MS } from './support/http.js';
import { createProject } from './support/projects.js';

const HOUR_MS = 3_600_000;
const silent = pino({ level: 'silent' });

/** A random icon key: the SHA-256 the store names files by. */
function key(): string {
  return sha256(randomBytes(16));
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
  const config = loadConfig({ ...env, DATABASE_URL: clientUrl(db) ?? '' });
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

describe('maintenance', () => {
  let root: string;
  let dir: string;
  let icons: IconStore;

  beforeEach(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-maintenance-'));
    dir = path.join(root, 'icons');
    mkdirSync(dir);
    icons = new IconStore(dir, () => 'http://cdn.test');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** An icon file, last written `ageMs` ago. */
  function iconFile(name: string, ageMs: number): string {
    const file = path.join(dir, `${name}.png`);
    writeFileSync(file, name);
    const then = new Date(Date.now() - ageMs);
    utimesSync(file, then, then);
    return name;
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

  it('removes an old icon file nothing refers to, in batches; keeps referenced, fresh and just-saved ones', async () => {
    const owner = await signUp();
    const project = await createProject(owner.token);
    const [byProject, byUser, saved] = [1, 2, 3].map(() => iconFile(key(), 2 * HOUR_MS)) as [string, string, string];
    const fresh = iconFile(key(), 30 * 60_000);
    const orphans = Array.from({ length: 5 }, () => iconFile(key(), 2 * HOUR_MS));
    await sql('update projects set icon = ? where id = ?', [byProject, project.id]);
    await sql('update users set icon = ? where id = ?', [byUser, owner.id]);
    // A transaction now refers to this stored copy: saving it again marks it as just used.
    await icons.save({ bytes: Buffer.from(saved), sha256: saved });
    writeFileSync(path.join(dir, 'unrelated.txt'), 'not an icon');
    utimesSync(path.join(dir, 'unrelated.txt'), new Date(0), new Date(0));

    const report = await maintenanceOn(database(), icons, { batchSize: 2 }).pruneOnce();
    expect(report).to.deep.equal({ ran: true, icons: 5, stripeEvents: 0, events: 0 });
    const kept = [byProject, byUser, fresh, saved].map((name) => `${name}.png`);
    expect(readdirSync(dir).sort()).to.deep.equal([...kept, 'unrelated.txt'].sort());
    for (const orphan of orphans) expect(existsSync(icons.file(orphan))).to.equal(false);
    await sql('update users set icon = null where id = ?', [owner.id]);
  });

  it('removes at most batchSize × maxBatches icon files a run; the next run goes on', async () => {
    for (let i = 0; i < 7; i++) iconFile(key(), 2 * HOUR_MS);
    const maintenance = maintenanceOn(database(), icons, { batchSize: 2, maxBatches: 2 });
    expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 4, stripeEvents: 0, events: 0 });
    expect(readdirSync(dir)).to.have.length(3);
    expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 3, stripeEvents: 0, events: 0 });
    expect(readdirSync(dir)).to.deep.equal([]);
  });

  it('removes stripe_events rows older than the retention in bounded batches, and keeps recent ones', async () => {
    const old = await insertStripeEvents(31 * DAY_MS, 5);
    const recent = await insertStripeEvents(29 * DAY_MS, 2);
    const maintenance = maintenanceOn(database(), icons, { batchSize: 2, maxBatches: 2 });
    expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 4, events: 0 });
    expect(await storedEvents(old)).to.have.length(1);
    expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 1, events: 0 });
    expect(await storedEvents([...old, ...recent])).to.deep.equal([...recent].sort());
    await sql('delete from stripe_events where id in (?)', [recent]);
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

    it('deletes events stored before the retention, oldest first, at most eventBatchSize × eventMaxBatches a run; keeps recent ones', async () => {
      const old = await insertEvents(91 * DAY_MS, 5);
      const recent = [...(await insertEvents(89 * DAY_MS, 2)), ...(await insertEvents(60_000, 1))];
      const maintenance = maintenanceOn(database(), icons, { eventBatchSize: 2, eventMaxBatches: 2, eventBatchPauseMs: 1 });
      expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 0, events: 4 });
      expect(await storedEventIds()).to.deep.equal([old[4], ...recent]);
      expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 0, events: 1 });
      expect(await storedEventIds()).to.deep.equal(recent);
      expect(await maintenance.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 0, events: 0 });
    });

    it('follows EVENT_RETENTION_DAYS, and keeps every event with 0', async () => {
      const ancient = await insertEvents(40 * 365 * DAY_MS, 2);
      const week = await insertEvents(8 * DAY_MS, 2);
      const kept = maintenanceOn(database(), icons, {}, { EVENT_RETENTION_DAYS: '0' });
      expect(await kept.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 0, events: 0 });
      expect(await storedEventIds()).to.deep.equal([...ancient, ...week]);
      const weekly = maintenanceOn(database(), icons, {}, { EVENT_RETENTION_DAYS: '7' });
      expect(await weekly.pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 0, events: 4 });
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
    iconFile(key(), 2 * HOUR_MS);
    const maintenance = maintenanceOn(database(), icons);
    const reports = await Promise.all([maintenance.pruneOnce(), maintenance.pruneOnce()]);
    expect(reports).to.deep.equal([
      { ran: true, icons: 1, stripeEvents: 0, events: 0 },
      { ran: false, icons: 0, stripeEvents: 0, events: 0 },
    ]);
  });

  it('on PostgreSQL, runs one prune at a time across instances: another instance skips while one runs', async function () {
    if (database().kind !== 'postgresql') this.skip(); // an embedded database has one owning process
    const extra = await startExtraServer();
    const blocker = new pg.Client({ connectionString: clientUrl(database()) });
    await blocker.connect();
    try {
      const [old] = await insertStripeEvents(31 * DAY_MS, 1);
      const orphan = iconFile(key(), 2 * HOUR_MS);
      // Holding the old row keeps the first instance's run (and its lock) under way.
      await blocker.query('begin');
      await blocker.query('select id from stripe_events where id = $1 for update', [old]);
      const first = maintenanceOn(database(), icons).pruneOnce();
      await waitFor('the first run to hold the lock', async () => {
        const held = `select count(*)::int as n from pg_locks where locktype = 'advisory' and classid = $1 and objid = 1 and granted`;
        const { rows } = await blocker.query(held, [0x5b1f]);
        return rows[0].n === 1;
      });
      const otherIcons = new IconStore(path.join(root, 'other'), () => 'http://cdn.test');
      expect(await maintenanceOn(extra.db, otherIcons).pruneOnce()).to.deep.equal({ ran: false, icons: 0, stripeEvents: 0, events: 0 });
      await blocker.query('commit');
      expect(await first).to.deep.equal({ ran: true, icons: 1, stripeEvents: 1, events: 0 });
      expect(existsSync(icons.file(orphan))).to.equal(false);
      // The lock went with the run: the other instance runs now.
      expect(await maintenanceOn(extra.db, otherIcons).pruneOnce()).to.deep.equal({ ran: true, icons: 0, stripeEvents: 0, events: 0 });
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
    const maintenance = new Maintenance(broken, icons, logger, loadConfig({}), options).start();
    await waitFor('two failed runs', () => warnings.filter((msg) => msg === 'pruning failed').length >= 2);
    await maintenance.stop();
    expect(await maintenance.pruneOnce()).to.deep.equal({ ran: false, icons: 0, stripeEvents: 0, events: 0 });
  });

  it('sweeps temporary icon files left by a killed process when the service starts, sparing fresh ones', async function () {
    this.timeout(60_000);
    const dataDir = path.join(root, 'data');
    const iconDir = path.join(dataDir, 'icons');
    mkdirSync(iconDir, { recursive: true });
    const kept = key();
    const stale = `.${kept}.00000000-0000-4000-8000-000000000001.tmp`;
    const fresh = `.${kept}.00000000-0000-4000-8000-000000000002.tmp`;
    for (const name of [stale, fresh, `${kept}.png`]) writeFileSync(path.join(iconDir, name), name);
    const fiveMinutesAgo = new Date(Date.now() - 5 * 60_000);
    for (const name of [stale, `${kept}.png`]) utimesSync(path.join(iconDir, name), fiveMinutesAgo, fiveMinutesAgo);

    const config = { ...loadConfig({ DATABASE_URL: clientUrl(database()) ?? '' }), port: 0, host: '127.0.0.1', dataDir };
    const server = await startServer(config, silent);
    try {
      await waitFor('the sweep', () => !existsSync(path.join(iconDir, stale)));
      expect(readdirSync(iconDir).sort()).to.deep.equal([fresh, `${kept}.png`].sort());
    } finally {
      await server.close();
    }
  });
});
