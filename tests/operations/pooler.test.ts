/**
 * The service behind a pooler in transaction mode: PgBouncer as Debian ships it (1.18, no prepared
 * statements kept per client; tests/support/pgbouncer.ts) in front of the PostgreSQL of
 * DATABASE_URL (else postgres://postgres@127.0.0.1:5432/postgres), as `DATABASE_URL`, with the
 * database itself as `DATABASE_DIRECT_URL`:
 * - a database whose sessions start without a statement bound is refused at start, naming the
 *   per-role setting that fixes it;
 * - two instances starting at once on a new database migrate it once (the lock on the direct URL),
 *   and serve: no statement goes to the pooler as a named prepared statement;
 * - a statement outside a transaction is bounded by the role's default, one inside by
 *   DB_STATEMENT_TIMEOUT_MS (`set local`), and a request waiting on a lock past it answers 503;
 * - the live stream across the two instances (LISTEN on the direct URL);
 * - webhook deliveries claimed by both instances reach the receiver exactly once each.
 * Skipped, with the reason printed, when there is no pgbouncer binary, or DATABASE_URL is unset and
 * no PostgreSQL answers at 127.0.0.1:5432.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { pino } from 'pino';
import { signUpOn } from '../support/accounts.js';
import { freshPostgresDatabase, sql, startServerIn, type TestServer } from '../support/harness.js';
import { callAt, expectData, expectError } from '../support/http.js';
import { findPgBouncer, startPgBouncer, type Pooler } from '../support/pgbouncer.js';
import { createProject, projectPath } from '../support/projects.js';
import { Receiver } from '../support/receiver.js';
import { RawStream } from '../support/sse.js';
import { sentDuring } from '../support/statements.js';

const MIGRATIONS = readdirSync(path.resolve('server/src/db/migrations'))
  .filter((file) => /^Migration\d+_\w+\.ts$/.test(file))
  .map((file) => file.replace(/\.ts$/, ''))
  .sort();

describe('behind PgBouncer in transaction mode', function () {
  this.timeout(120_000);
  const adminUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  let pooler: Pooler | undefined;
  const cleanups: (() => Promise<unknown>)[] = [];

  before(async function () {
    const { bin, reason } = findPgBouncer();
    if (!bin) {
      console.log(`      skipped: ${reason}`);
      this.skip();
    }
    try {
      pooler = await startPgBouncer(bin, adminUrl);
    } catch (error) {
      if (process.env.DATABASE_URL) throw error;
      console.log(`      skipped: DATABASE_URL is unset and no PostgreSQL answers through a pooler at ${new URL(adminUrl).host}`);
      this.skip();
    }
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await pooler?.stop();
  });

  /** A new database whose sessions start with `statementTimeoutMs` (as `ALTER ROLE … SET` would make them), unless undefined. */
  async function freshDatabase(statementTimeoutMs: number | undefined): Promise<string> {
    const fresh = await freshPostgresDatabase(adminUrl, 'sb_pooler');
    cleanups.push(fresh.drop);
    if (statementTimeoutMs !== undefined) {
      const name = new URL(fresh.url).pathname.slice(1);
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`alter database ${name} set statement_timeout = ${statementTimeoutMs}`).finally(() => client.end());
    }
    return fresh.url;
  }

  function startBehindPooler(directUrl: string, env: Record<string, string> = {}): Promise<TestServer> {
    return startServerIn(
      'signalboard-pooler',
      {
        ...process.env,
        DATABASE_URL: pooler!.through(directUrl),
        DATABASE_DIRECT_URL: directUrl,
        AUTH_RATE_LIMIT: '0',
        API_RATE_LIMIT: '0',
        BCRYPT_ROUNDS: '4',
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_POLL_MS: '50',
        ...env,
      },
      pino({ level: 'silent' }),
    ).then((server) => {
      cleanups.push(() => server.close());
      return server;
    });
  }

  it('refuses to start where a statement outside a transaction would have no bound, and names the setting', async () => {
    const directUrl = await freshDatabase(undefined);
    const refusal = await startBehindPooler(directUrl).then(
      () => new Error('the service started'),
      (error: Error) => error,
    );
    expect(refusal.message).to.include('statements outside a transaction would run without a time bound');
    expect(refusal.message).to.include(`ALTER ROLE "${new URL(adminUrl).username || 'postgres'}" SET statement_timeout = 5000`);
  });

  describe('two instances on one new database', () => {
    let directUrl: string;
    let a: TestServer;
    let b: TestServer;
    let token: string;
    let namespace: string;

    it('start at once, migrate it once, and serve through the pooler, never with a named prepared statement', async () => {
      directUrl = await freshDatabase(5_000);
      [a, b] = await Promise.all([startBehindPooler(directUrl), startBehindPooler(directUrl)]);
      const recorded = (await sql<{ name: string }>('select name from mikro_orm_migrations order by name', [], a.db)).map((r) => r.name);
      expect(recorded).to.deep.equal(MIGRATIONS);

      const sent = await sentDuring(async () => {
        const owner = await signUpOn(a);
        token = owner.token;
        namespace = (await createProject(token, {}, b.url)).namespace;
        const event = expectData(
          await callAt(a.url, 'POST', projectPath(namespace, '/feeds/general/events'), token, { event: 'through a pooler' }),
          201,
        );
        const listed = expectData(await callAt(b.url, 'GET', projectPath(namespace, '/events'), token));
        expect(listed.items.map((item: { id: string }) => item.id)).to.deep.equal([event.id]);
      });
      expect(sent.length).to.be.above(5);
      expect(sent.filter((statement) => statement.name !== undefined)).to.deep.equal([]);
    });

    it('streams events published to one instance to a client of the other', async () => {
      const stream = await RawStream.open(b.url + projectPath(namespace, '/events/stream'), { token });
      await stream.until(() => stream.retry !== undefined, 5_000);
      const published: string[] = [];
      for (let i = 0; i < 20; i++) {
        const answer = await callAt(a.url, 'POST', projectPath(namespace, '/feeds/general/events'), token, { event: `live ${i}` });
        published.push(expectData(answer, 201).id);
      }
      await stream.waitForEvents(20, 10_000);
      stream.close();
      expect(stream.events.map((message) => message.id)).to.deep.equal(published);
    });

    it('delivers each event to a webhook once, both instances claiming from one queue', async () => {
      const receiver = await Receiver.start();
      cleanups.push(() => receiver.close());
      expectData(await callAt(a.url, 'POST', projectPath(namespace, '/webhooks'), token, { url: `${receiver.url}/hook` }), 201);
      const published: string[] = [];
      await Promise.all(
        [a, b].map(async (server) => {
          for (let i = 0; i < 20; i++) {
            const answer = await callAt(server.url, 'POST', projectPath(namespace, '/feeds/general/events'), token, { event: `hook ${i}` });
            published.push(expectData(answer, 201).id);
          }
        }),
      );
      await receiver.waitFor(40, 20_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const delivered = receiver.received.map((request) => JSON.parse(request.body).data.id as string);
      expect([...delivered].sort()).to.deep.equal([...published].sort());
      const states = await sql<{ state: string; n: number }>(
        'select state, count(*)::int as n from webhook_deliveries group by state',
        [],
        a.db,
      );
      expect(states).to.deep.equal([{ state: 'delivered', n: 40 }]);
    });
  });

  describe('statement bounds', () => {
    let server: TestServer;
    before(async () => {
      // Sessions start with 1 s (the role's default); the service's own bound is 3 s.
      server = await startBehindPooler(await freshDatabase(1_000), { DB_STATEMENT_TIMEOUT_MS: '3000' });
    });

    const codeOf = (work: Promise<unknown>) =>
      work.then(
        () => 'completed',
        (error: { code?: string; message: string }) => error.code ?? error.message,
      );

    it('ends a statement outside a transaction at the role’s default, and one inside at DB_STATEMENT_TIMEOUT_MS', async () => {
      const em = () => server.db.orm.em.fork();
      expect(await codeOf(em().getConnection().execute('select pg_sleep(1.5)'))).to.equal('57014');
      const inTransaction = (seconds: number) =>
        em().transactional((tx) => tx.getConnection().execute(`select pg_sleep(${seconds})`, [], 'all', tx.getTransactionContext()));
      expect(await codeOf(inTransaction(1.5))).to.equal('completed');
      const started = performance.now();
      expect(await codeOf(inTransaction(10))).to.equal('57014');
      // The server's bound, not the client's (3 s + 1 s, "Query read timeout"), ended it.
      expect(performance.now() - started).to.be.within(2_900, 3_900);
    });

    it('answers 503 to a write that waits on a lock past DB_STATEMENT_TIMEOUT_MS', async () => {
      const owner = await signUpOn(server);
      const project = await createProject(owner.token, {}, server.url);
      const holder = new pg.Client({ connectionString: server.db.directSession!.connectionString });
      await holder.connect();
      cleanups.push(() => holder.end());
      await holder.query('begin');
      await holder.query('select id from projects where id = $1 for update', [project.id]);
      const started = performance.now();
      const answer = await callAt(server.url, 'POST', projectPath(project.namespace, '/feeds/general/events'), owner.token, {
        event: 'waits',
      });
      const ms = performance.now() - started;
      await holder.query('rollback');
      expectError(answer, 503, 'unavailable');
      expect(ms).to.be.within(2_900, 3_900);
    });
  });
});
