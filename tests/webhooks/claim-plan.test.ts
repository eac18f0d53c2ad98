/**
 * The claim of due deliveries is planned for the queue as it is at each claim, however much the
 * queue grew since the service first ran it. As a prepared statement, PostgreSQL would keep the
 * generic plan it made for the table as it was then. Made while the queue was empty (and analysed
 * so), that plan reads the whole table four times at every claim: 200,004 rows here. At 50,000
 * rows a fresh plan goes through the indexes (a small table may be cheaper to scan, so the test
 * grows it well past that). PostgreSQL only, with DATABASE_PREPARED=true: the embedded database never
 * prepares statements, nor the service without that setting.
 */
import { expect } from 'chai';
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../../server/src/db/raw.js';
import { claimDue } from '../../server/src/db/repositories/webhook-outbox.js';
import { signUpOn } from '../support/accounts.js';
import type { TestServer } from '../support/harness.js';
import { callAt, expectData } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { throughPooler } from '../support/pgbouncer.js';
import { startWebhookServer } from '../support/receiver.js';

/** Undoes the test's transaction: nothing it wrote is ever seen by the service. */
class RolledBack extends Error {}

const SETTLED = 50_000;

describe('webhooks: the claim of due deliveries', function () {
  this.timeout(60_000);
  let server: TestServer;

  before(async function () {
    if (!process.env.DATABASE_URL) {
      console.log('      (skipped: statements are prepared on PostgreSQL only; run with DATABASE_URL)');
      this.skip();
    }
    // Prepared as DATABASE_PREPARED=true makes them, where nothing pools the connections: the case this guards.
    server = await startWebhookServer({ DATABASE_PREPARED: String(!throughPooler) });
  });
  after(async () => {
    await server?.close();
  });

  it(`reads the queue through its indexes after it grew from empty to ${SETTLED.toLocaleString('en')} rows`, async () => {
    const owner = await signUpOn(server);
    const { namespace } = await createProject(owner.token, {}, server.url);
    // An endpoint turned off: the service's own deliverer never claims for it.
    const endpoint = expectData(
      await callAt(server.url, 'POST', projectPath(namespace, '/webhooks'), owner.token, { url: 'http://127.0.0.1:9/off', enabled: false }),
      201,
    );
    const claim = (tx: EntityManager) =>
      claimDue(tx, { skipEndpoints: [], probeEndpoints: [], perEndpoint: 64, limit: 64, leaseMs: 60_000 });
    const scanned = async (tx: EntityManager) => {
      const [row] = await query<{ n: string }>(
        tx,
        "select seq_tup_read as n from pg_stat_xact_user_tables where relname = 'webhook_deliveries'",
        [],
      );
      return Number(row?.n ?? 0);
    };

    const outcome = await server.db.orm.em
      .fork()
      .transactional(async (tx) => {
        // Filling the queue is the test's set-up, which a busy machine may not finish within the
        // service's statement bound; what is measured is the rows the claim reads, not its time.
        await query(tx, 'set local statement_timeout = 0', []);
        // The table as a fresh install's statistics see it: analysed while empty.
        await query(tx, 'analyze webhook_deliveries', []);
        // More runs than PostgreSQL plans afresh before it may settle on a generic plan (five).
        await query(tx, 'update webhook_endpoints set enabled = true where id = ?', [endpoint.id]);
        for (let i = 0; i < 8; i++) expect(await claim(tx)).to.deep.equal([]);
        await query(
          tx,
          `insert into webhook_deliveries (id, endpoint_id, type, payload, state, attempts, created_at)
           select gen_random_uuid(), ?, 'project.updated', '{}', 'delivered', 1, now() from generate_series(1, ?::int)`,
          [endpoint.id, SETTLED],
        );
        await query(
          tx,
          `insert into webhook_deliveries (id, endpoint_id, type, payload, next_attempt_at, created_at)
           values (gen_random_uuid(), ?, 'project.updated', '{}', now(), now())`,
          [endpoint.id],
        );
        const before = await scanned(tx);
        const claimed = await claim(tx);
        const read = (await scanned(tx)) - before;
        throw new RolledBack(JSON.stringify({ claimed: claimed.length, read }));
      })
      .catch((error: unknown) => {
        if (error instanceof RolledBack) return JSON.parse(error.message) as { claimed: number; read: number };
        throw error;
      });
    expect(outcome.claimed, 'the one due delivery').to.equal(1);
    expect(outcome.read, 'rows read by sequential scans of the queue').to.be.below(100);
  });
});
