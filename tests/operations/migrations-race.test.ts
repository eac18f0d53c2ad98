/**
 * Migrations race: three instances of a release start at once on an empty PostgreSQL database.
 * Guards the class "instances starting together race the migrations" (two of three died on a
 * duplicate key of mikro_orm_migrations): every instance must come up, whatever the order, and
 * each migration must be recorded once.
 *
 * Runs on the PostgreSQL of DATABASE_URL, or else on postgres://postgres@127.0.0.1:5432/postgres,
 * in a database of its own that it creates and drops (with TEST_POOLER=1, through PgBouncer in
 * transaction mode, the lock on the direct URL). Skipped, with the reason printed, only when
 * DATABASE_URL is unset and no PostgreSQL answers there.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { pino } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { serviceDatabaseEnv } from '../support/pgbouncer.js';

const INSTANCES = 3;

describe('migrations: instances starting at once on a new database', function () {
  this.timeout(120_000);
  const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `sb_migrations_race_${Date.now()}_${randomBytes(3).toString('hex')}`;
  let created = false;
  const servers: RunningServer[] = [];
  const dataDirs: string[] = [];

  async function connected<T>(connectionString: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString, connectionTimeoutMillis: 3_000 });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }

  before(async function () {
    try {
      await connected(adminUrl, (client) => client.query(`create database ${name}`));
      created = true;
    } catch (error) {
      if (process.env.DATABASE_URL) throw error;
      const where = new URL(adminUrl).host;
      console.log(`      skipped: DATABASE_URL is unset and no PostgreSQL answers at ${where} (${(error as Error).message})`);
      this.skip();
    }
  });

  after(async () => {
    await Promise.all(servers.map((server) => server.close().catch(() => {})));
    if (created) await connected(adminUrl, (client) => client.query(`drop database if exists ${name} with (force)`));
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  });

  it('starts every instance and records each migration once', async () => {
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const logs: { msg?: string; migrations?: string[] }[][] = [];
    const database = await serviceDatabaseEnv(url.toString());
    const started = performance.now();
    const starts = Array.from({ length: INSTANCES }, (_, i) => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-migrations-race-'));
      dataDirs.push(dataDir);
      const env = { ...process.env, ...database, STRIPE_SECRET_KEY: '' };
      const config = { ...loadConfig(env), port: 0, host: '127.0.0.1', dataDir };
      logs[i] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void logs[i]!.push(JSON.parse(line)) });
      return startServer(config, logger);
    });
    const outcomes = await Promise.allSettled(starts);
    for (const outcome of outcomes) if (outcome.status === 'fulfilled') servers.push(outcome.value);
    const failures = outcomes.flatMap((o, i) =>
      o.status === 'rejected' ? [`instance ${i}: ${(o.reason as Error).message.split('\n')[0]}`] : [],
    );
    const appliedBy = logs.map((entries) => entries.find((e) => e.msg === 'migrations applied')?.migrations?.length ?? 0);
    console.log(
      `      ${INSTANCES} instances started at once: ${servers.length} up in ${Math.round(performance.now() - started)} ms; ` +
        `migrations applied per instance: ${appliedBy.join(', ')}${failures.length ? `; failed: ${failures.join('; ')}` : ''}`,
    );
    expect(failures, 'instances that failed to start').to.deep.equal([]);

    const bundled = readdirSync(path.resolve('server/src/db/migrations'))
      .flatMap((file) => /^(Migration\d+_\w+)\.ts$/.exec(file)?.[1] ?? [])
      .sort();
    const { rows } = await connected(url.toString(), (client) =>
      client.query<{ name: string; n: number }>('select name, count(*)::int as n from mikro_orm_migrations group by name order by name'),
    );
    expect(rows, 'each migration recorded once').to.deep.equal(bundled.map((migration) => ({ name: migration, n: 1 })));
    expect(
      appliedBy.reduce((a, b) => a + b, 0),
      'migrations applied, over all instances',
    ).to.equal(bundled.length);
    for (const server of servers) {
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).to.equal(200);
      expect(await ready.json()).to.deep.equal({ success: true, data: { status: 'ok' } });
    }
  });
});
