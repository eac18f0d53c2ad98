/**
 * A write that only the owner may make, checked before a hand-over of the project committed and
 * carried out after it: the write must be refused (403 `not_owner`), not done by the old owner.
 * The role a request's access check read is only a first answer; every owner's write decides again
 * under the project's row lock, which a transfer holds (FOR UPDATE) until it commits.
 *
 * The race is made deterministic. A transaction of the test's own holds the heir's membership row,
 * so the transfer stops inside its transaction, holding the project's row, just before it makes the
 * heir the owner. The old owner's write then passes its access check (the transfer has not
 * committed) and waits for the project's row. The test lets the transfer go: it commits, and the
 * write gets the row with the ownership already handed over. PostgreSQL only: the embedded
 * database serves one session, so no lock can be held beside the service's, and its transactions
 * run one after another.
 *
 * Starting a checkout and opening the customer portal are owner-only too, and must not reach Stripe
 * for the old owner. With billing off they answer 503, so they go to a second server with billing
 * on (startExtraServer), whose Stripe calls reach the tests' stand-in (support/stripe-stand-in.ts),
 * which records every call. It shares the run's database, so the projects made through the run's
 * own server, and the transfer sent to it, are the ones it sees.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { count, database, secret, sql, startExtraServer, type TestServer } from '../support/harness.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { call, callAt, expectData, expectError, type Answer } from '../support/http.js';
import { addMember, createProject, invite, projectPath } from '../support/projects.js';
import { newSubscriptionId } from '../support/stripe-events.js';
import { StripeStandIn } from '../support/stripe-stand-in.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const STRIPE_KEY = secret(`sk_test_${randomBytes(12).toString('hex')}`);

/** The server with billing on, and the stand-in its Stripe calls reach (started before the cases, on PostgreSQL). */
let billed: { server: TestServer; standIn: StripeStandIn } | undefined;

function billing(): { server: TestServer; standIn: StripeStandIn } {
  if (!billed) throw new Error('the billing server is not running');
  return billed;
}

async function startBilled(): Promise<void> {
  const standIn = await StripeStandIn.start(STRIPE_KEY);
  try {
    const server = await startExtraServer({
      STRIPE_SECRET_KEY: STRIPE_KEY,
      STRIPE_API_URL: standIn.url,
      STRIPE_PRICE_TIERS: 'price_basic:1,price_pro:2',
      STRIPE_SUCCESS_URL: 'https://app.example.com/billing/done?session={CHECKOUT_SESSION_ID}',
      STRIPE_CANCEL_URL: 'https://app.example.com/billing/',
      STRIPE_PORTAL_RETURN_URL: 'https://app.example.com/settings/billing',
      ...CLOSES_AT_ONCE,
    });
    billed = { server, standIn };
  } catch (error) {
    await standIn.close();
    throw error;
  }
}

async function planOf(projectId: string): Promise<{ tier: number; billing_id: string | null }> {
  const [row] = await sql<{ tier: number; billing_id: string | null }>('select tier, billing_id from projects where id = ?', [projectId]);
  return row!;
}

/** Stripe was asked nothing: no subscription read, no session created. */
function expectStripeUntouched(): void {
  const { standIn } = billing();
  expect(
    standIn.calls.map((c) => `${c.method} ${c.path}`),
    'calls to Stripe',
  ).to.deep.equal([]);
  expect(standIn.checkoutSessions, 'checkout sessions').to.deep.equal([]);
  expect(standIn.portalSessions, 'portal sessions').to.deep.equal([]);
}

async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Whether a backend of the run's database is waiting for a lock in a statement that matches `pattern` (ILIKE). */
async function waitingOn(pattern: string): Promise<boolean> {
  const n = await count(
    `select count(*)::int from pg_stat_activity
     where datname = current_database() and wait_event_type = 'Lock' and query ilike ?`,
    [pattern],
  );
  return n > 0;
}

async function roleOf(projectId: string, userId: string): Promise<string | undefined> {
  const [row] = await sql<{ role: string }>('select role from project_members where project_id = ? and user_id = ?', [projectId, userId]);
  return row?.role;
}

interface Cast {
  owner: TestUser;
  heir: TestUser;
  /** A third member, whom the old owner tries to remove. */
  mate: TestUser;
  /** A user with a pending invite, which the old owner tries to revoke. */
  invitee: TestUser;
  /** A user the old owner tries to invite. */
  outsider: TestUser;
  project: any;
  /** A Stripe subscription id, which the portal's case gives the project before the race. */
  subscription: string;
}

/**
 * The old owner's writes, each with what must be as it was when it is refused, and what the
 * project needs beforehand (`prepare`) beyond the cast.
 */
const WRITES: {
  name: string;
  prepare?: (cast: Cast) => Promise<void>;
  send: (cast: Cast) => Promise<Answer>;
  unchanged: (cast: Cast) => Promise<void>;
}[] = [
  {
    name: 'DELETE /v1/projects/{namespace}',
    send: ({ owner, project }) => call('DELETE', projectPath(project.namespace), owner.token),
    unchanged: async ({ project }) => {
      expect(await count('select count(*)::int from projects where id = ?', [project.id]), 'the project').to.equal(1);
    },
  },
  {
    name: 'PATCH /v1/projects/{namespace}',
    send: ({ owner, project }) => call('PATCH', projectPath(project.namespace), owner.token, { name: 'Renamed by the old owner' }),
    unchanged: async ({ project }) => {
      const [row] = await sql<{ name: string }>('select name from projects where id = ?', [project.id]);
      expect(row?.name).to.equal(project.name);
    },
  },
  {
    name: 'POST /v1/projects/{namespace}/invites',
    send: ({ owner, outsider, project }) =>
      call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: outsider.username }),
    unchanged: async ({ outsider, project }) => {
      expect(
        await count('select count(*)::int from project_invites where project_id = ? and user_id = ?', [project.id, outsider.id]),
      ).to.equal(0);
    },
  },
  {
    name: 'DELETE /v1/projects/{namespace}/invites/{username}',
    send: ({ owner, invitee, project }) => call('DELETE', projectPath(project.namespace, `/invites/${invitee.username}`), owner.token),
    unchanged: async ({ invitee, project }) => {
      expect(
        await count('select count(*)::int from project_invites where project_id = ? and user_id = ?', [project.id, invitee.id]),
      ).to.equal(1);
    },
  },
  {
    name: 'DELETE /v1/projects/{namespace}/members/{username}',
    send: ({ owner, mate, project }) => call('DELETE', projectPath(project.namespace, `/members/${mate.username}`), owner.token),
    unchanged: async ({ mate, project }) => {
      expect(await roleOf(project.id, mate.id)).to.equal('member');
    },
  },
  {
    name: 'POST /v1/projects/{namespace}/billing/checkout',
    send: ({ owner, project }) =>
      callAt(billing().server.url, 'POST', projectPath(project.namespace, '/billing/checkout'), owner.token, { tier: 2 }),
    unchanged: async ({ project }) => {
      expectStripeUntouched();
      expect(await planOf(project.id)).to.deep.equal({ tier: 0, billing_id: null });
    },
  },
  {
    name: 'POST /v1/projects/{namespace}/billing/portal',
    // The portal is for a project with a subscription: set by hand, as Stripe's events would have.
    prepare: async ({ project, subscription }) => {
      await sql('update projects set billing_id = ?, tier = 1 where id = ?', [subscription, project.id]);
    },
    send: ({ owner, project }) => callAt(billing().server.url, 'POST', projectPath(project.namespace, '/billing/portal'), owner.token),
    unchanged: async ({ project, subscription }) => {
      expectStripeUntouched();
      expect(await planOf(project.id)).to.deep.equal({ tier: 1, billing_id: subscription });
    },
  },
];

describe('an owner’s write whose access check ran before a transfer committed', () => {
  before(async function () {
    if (database().kind !== 'postgresql') {
      console.log(
        '      skipped: the embedded database serves one session, so no lock can be held beside the service’s and its transactions never overlap; run with DATABASE_URL',
      );
      this.skip();
    }
    this.timeout(120_000);
    await startBilled();
  });

  after(async () => {
    await billed?.server.close();
    await billed?.standIn.close();
    billed = undefined;
  });

  beforeEach(() => billed?.standIn.reset());

  for (const write of WRITES) {
    it(`${write.name}: 403 not_owner once the transfer commits, and nothing changes`, async function () {
      this.timeout(60_000);
      const [owner, heir, mate, invitee, outsider] = await Promise.all([signUp(), signUp(), signUp(), signUp(), signUp()]);
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, heir);
      await addMember(owner.token, project.namespace, mate);
      await invite(owner.token, project.namespace, invitee.username);
      const cast: Cast = { owner, heir, mate, invitee, outsider, project, subscription: newSubscriptionId() };
      await write.prepare?.(cast);

      const blocker = new pg.Client({ connectionString: database().orm.config.get('clientUrl') });
      await blocker.connect();
      let transfer: Promise<Answer> | undefined;
      let racer: Promise<Answer> | undefined;
      try {
        await blocker.query('begin');
        await blocker.query('select 1 from project_members where project_id = $1 and user_id = $2 for update', [project.id, heir.id]);
        // The transfer takes the project's row, then stops where it makes the heir the owner.
        transfer = call('PUT', projectPath(project.namespace, '/owner'), owner.token, { username: heir.username });
        await waitFor('the transfer to wait on the heir’s row', () => waitingOn('%project_members%'));
        // The old owner's write passes its access check, and waits for the project's row.
        racer = write.send(cast);
        await waitFor('the write to wait on the project’s row', () => waitingOn('%from projects where id = % for %'));
      } finally {
        await blocker.query('rollback').catch(() => {});
        await blocker.end();
      }

      expectData(await transfer, 200, 'the transfer');
      const answer = await racer;
      expectError(answer, 403, 'not_owner', write.name);
      expect(await roleOf(project.id, heir.id), 'the heir').to.equal('owner');
      expect(await roleOf(project.id, owner.id), 'the old owner').to.equal('member');
      await write.unchanged(cast);
    });
  }
});
