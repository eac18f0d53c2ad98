/**
 * The access matrix of every project-scoped operation, from ONE table: operationId × caller →
 * expected answer. The operations come from the contract the service serves
 * (`GET /v1/openapi.json`, every path under `/v1/projects/{namespace}`); an operation without a row
 * fails the suite, so a new project route cannot land without its access rules written down here.
 *
 * Each cell sends a valid request (existing ids and usernames, valid bodies), so the status tells
 * about access and nothing else. Rows whose success would spoil the shared project (delete it,
 * remove a member, accept or delete an invite, invite the spare user) get a fresh project per cell.
 */
import { expect } from 'chai';
import { ContractModel, type Operation } from '../tools/src/conformance/contract.js';
import { parseJson, requestInit } from '../tools/src/conformance/http.js';
import { baseUrl } from './support/harness.js';
import { apiToken, signUp, type TestUser } from './support/accounts.js';
import { call, expectData, http } from './support/http.js';
import { addMember, createInsight, createProject, invite, projectPath } from './support/projects.js';
import { contractModel } from './support/response-check.js';

const CALLERS = ['owner', 'member', 'nonMember', 'invitee', 'ownerApiToken', 'noToken', 'malformedToken'] as const;
type Caller = (typeof CALLERS)[number];

/** A success status, or an error status with its code. */
type Outcome = 200 | 201 | 204 | readonly [status: number, code: string];
type Row = {
  /** A fresh project for every caller, because one caller's success would change the fixture for the next. */
  freshPerCaller?: boolean;
  /** Path parameters other than `namespace`, query string and JSON body of a valid request. */
  request: (f: Fixture, caller: Caller) => Promise<Request> | Request;
  expect: Record<Caller, Outcome>;
};
type Request = { params?: Record<string, string>; query?: string; body?: unknown };

// ----- the outcomes, by rule -----
const UNAUTHENTICATED = [401, 'unauthenticated'] as const;
const NOT_FOUND = [404, 'not_found'] as const;
const NOT_OWNER = [403, 'not_owner'] as const;
const FORBIDDEN = [403, 'forbidden'] as const;
const SESSION_REQUIRED = [403, 'session_required'] as const;
const BILLING_OFF = [503, 'unavailable'] as const;

const anonymous = { noToken: UNAUTHENTICATED, malformedToken: UNAUTHENTICATED } as const;
/** A project the caller is not a member of does not exist for it. */
const outsiders = { nonMember: NOT_FOUND, invitee: NOT_FOUND } as const;

/** Any member may. */
function members(ok: Outcome): Record<Caller, Outcome> {
  return { owner: ok, member: ok, ownerApiToken: ok, ...outsiders, ...anonymous };
}
/** The owner alone; a member is told so. */
function ownerOnly(ok: Outcome): Record<Caller, Outcome> {
  return { owner: ok, member: NOT_OWNER, ownerApiToken: ok, ...outsiders, ...anonymous };
}

// ----- the table -----
const MATRIX: Record<string, Row> = {
  getProject: { request: () => ({}), expect: members(200) },
  updateProject: { request: (_f, caller) => ({ body: { name: `Renamed by ${caller}` } }), expect: ownerOnly(200) },
  deleteProject: {
    freshPerCaller: true,
    request: () => ({}),
    expect: { ...ownerOnly(204), ownerApiToken: SESSION_REQUIRED },
  },
  removeMember: {
    // Another member than the caller: the owner removes it, a member may not (leaving is tested elsewhere).
    freshPerCaller: true,
    request: (f) => ({ params: { username: f.other.username } }),
    expect: ownerOnly(204),
  },
  createInvite: {
    freshPerCaller: true,
    request: (f) => ({ body: { username: f.spare.username } }),
    expect: ownerOnly(201),
  },
  listInvites: { request: () => ({ query: '?limit=10' }), expect: members(200) },
  acceptInvite: {
    // Only the invitee, on its own invite; a member naming the invitee is refused, anyone else sees nothing.
    freshPerCaller: true,
    request: (f) => ({ params: { username: f.invitee.username } }),
    expect: { owner: FORBIDDEN, member: FORBIDDEN, ownerApiToken: FORBIDDEN, nonMember: NOT_FOUND, invitee: 200, ...anonymous },
  },
  deleteInvite: {
    // The owner revokes, the invitee declines its own.
    freshPerCaller: true,
    request: (f) => ({ params: { username: f.invitee.username } }),
    expect: { owner: 204, member: NOT_OWNER, ownerApiToken: 204, nonMember: NOT_FOUND, invitee: 204, ...anonymous },
  },
  createInsight: { request: (_f, caller) => ({ body: { title: `Made by ${caller}`, value: 1, emoji: '📈' } }), expect: members(201) },
  listInsights: { request: () => ({ query: '?limit=10' }), expect: members(200) },
  updateInsight: {
    request: async (f) => ({ params: { insight_id: (await f.newInsight()).id }, body: { increment: 1 } }),
    expect: members(200),
  },
  deleteInsight: {
    request: async (f) => ({ params: { insight_id: (await f.newInsight()).id } }),
    expect: members(204),
  },
  listActivity: { request: () => ({ query: '?limit=10' }), expect: members(200) },

  listFeeds: { request: () => ({ query: '?limit=10' }), expect: members(200) },
  createFeed: { request: (_f, caller) => ({ body: { name: `feed-${caller.toLowerCase()}`, emoji: '📣' } }), expect: members(201) },
  updateFeed: {
    request: async (f) => ({ params: { feed: await f.newFeed() }, body: { description: 'Everything that happens' } }),
    expect: members(200),
  },
  // A feed of its own per cell: the project keeps `general`, so this is never its last feed (409 last_feed).
  deleteFeed: { request: async (f) => ({ params: { feed: await f.newFeed() } }), expect: members(204) },
  publishEvent: {
    request: () => ({ params: { feed: 'general' }, body: { event: 'Signed up', tags: { plan: 'free' } } }),
    expect: members(201),
  },
  // A member's API token as well as a session, as for a single publication.
  publishEvents: {
    request: () => ({
      body: {
        events: [
          { feed: 'general', event: 'Signed up' },
          { feed: 'general', event: 'Paid', tags: { plan: 'pro' } },
        ],
      },
    }),
    expect: members(201),
  },
  listEvents: { request: () => ({ query: '?limit=10' }), expect: members(200) },
  // A stream: the cell reads its status and headers, then lets go.
  streamEvents: { request: () => ({}), expect: members(200) },
  // The run's server has billing off (no STRIPE_SECRET_KEY): past the access rules, the owner's
  // answer is 503 `unavailable`, which shows the rules let it through. tests/billing-checkout.test.ts
  // has the same rules with billing on.
  createCheckoutSession: { request: () => ({ body: { tier: 1 } }), expect: ownerOnly(BILLING_OFF) },
  createPortalSession: { request: () => ({}), expect: { ...ownerOnly(BILLING_OFF), ownerApiToken: SESSION_REQUIRED } },
  transferOwnership: {
    // To another member than the caller: the owner hands the project over, which changes who owns the fixture.
    freshPerCaller: true,
    request: (f) => ({ body: { username: f.other.username } }),
    expect: { ...ownerOnly(200), ownerApiToken: SESSION_REQUIRED },
  },
};

// ----- the people and the project each cell runs against -----
interface People {
  owner: TestUser;
  member: TestUser;
  /** A second member, the one removeMember removes. */
  other: TestUser;
  nonMember: TestUser;
  invitee: TestUser;
  /** A user with no tie to any fixture project, for createInvite. */
  spare: TestUser;
  ownerApiToken: string;
}

interface Fixture extends People {
  namespace: string;
  newInsight: () => Promise<{ id: string }>;
  /** A new feed's name. */
  newFeed: () => Promise<string>;
}

let feeds = 0;

/** A project with its owner, two members and one pending invitee. */
async function fixture(people: People): Promise<Fixture> {
  const project = await createProject(people.owner.token, { name: 'Matrix' });
  const namespace: string = project.namespace;
  await addMember(people.owner.token, namespace, people.member);
  await addMember(people.owner.token, namespace, people.other);
  await invite(people.owner.token, namespace, people.invitee.username);
  return {
    ...people,
    namespace,
    newInsight: () => createInsight(people.owner.token, namespace, { title: 'Target', value: 10 }),
    newFeed: async () => {
      feeds += 1;
      const name = `target-${feeds}`;
      expectData(await call('POST', projectPath(namespace, '/feeds'), people.owner.token, { name }), 201, 'create feed');
      return name;
    },
  };
}

function authorization(f: Fixture, caller: Caller): string | undefined {
  switch (caller) {
    case 'ownerApiToken':
      return `Bearer ${f.ownerApiToken}`;
    case 'noToken':
      return undefined;
    case 'malformedToken':
      return 'Bearer not-a-token';
    default:
      return `Bearer ${f[caller].token}`;
  }
}

/** One cell: the answer as "<status> <code>" (or the bare status on success), with what the contract's judge finds in it appended. */
async function runCell(op: Operation, f: Fixture, caller: Caller, row: Row): Promise<string> {
  const request = await row.request(f, caller);
  const params: Record<string, string> = { namespace: f.namespace, ...request.params };
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`the row of ${op.operationId} gives no value for {${name}}`);
    return encodeURIComponent(value);
  });
  const auth = authorization(f, caller);
  const sent = { method: op.method, path: path + (request.query ?? ''), ...(auth ? { authorization: auth } : {}), json: request.body };
  // A time limit, and an event stream read only as far as its headers.
  const response = await fetch(baseUrl() + sent.path, requestInit(sent, { signal: AbortSignal.timeout(10_000) }));
  const stream = response.headers.get('content-type')?.startsWith('text/event-stream');
  const text = stream ? undefined : await response.text();
  if (stream) await response.body?.cancel();
  const problems = contractModel().judge({ method: op.method, path, status: response.status, headers: response.headers, body: text });
  const code = response.status >= 300 ? ` ${parseJson(text)?.error?.code}` : '';
  return `${response.status}${code}${problems.length ? ` (${problems.join('; ')})` : ''}`;
}

function show(outcome: Outcome): string {
  return typeof outcome === 'number' ? String(outcome) : `${outcome[0]} ${outcome[1]}`;
}

describe(
  `access matrix: ${Object.keys(MATRIX).length} project operations × ${CALLERS.length} callers = ` +
    `${Object.keys(MATRIX).length * CALLERS.length} cells`,
  () => {
    let operations: Map<string, Operation>;
    let people: People;
    let shared: Fixture | undefined;

    before(async function () {
      this.timeout(60_000);
      const served = await http('GET', '/v1/openapi.json');
      expect(served.status).to.equal(200);
      const projectScoped = new ContractModel(served.json).operations.filter((op) => op.path.startsWith('/v1/projects/{namespace}'));
      operations = new Map(projectScoped.map((op) => [op.operationId, op]));
      const [owner, member, other, nonMember, invitee, spare] = await Promise.all(Array.from({ length: 6 }, () => signUp()));
      people = {
        owner: owner!,
        member: member!,
        other: other!,
        nonMember: nonMember!,
        invitee: invitee!,
        spare: spare!,
        ownerApiToken: '',
      };
      people.ownerApiToken = await apiToken(people.owner.token);
      console.log(
        `      access matrix: ${Object.keys(MATRIX).length} rows × ${CALLERS.length} callers = ` +
          `${Object.keys(MATRIX).length * CALLERS.length} cells`,
      );
    });

    it('has a row for every project-scoped operation of the served contract, and no row for anything else', () => {
      const served = [...operations.keys()].sort();
      expect(served.length).to.be.greaterThan(0);
      const withoutRow = served.filter((id) => !(id in MATRIX));
      const withoutOperation = Object.keys(MATRIX).filter((id) => !operations.has(id));
      expect({ withoutRow, withoutOperation }).to.deep.equal({ withoutRow: [], withoutOperation: [] });
    });

    for (const [operationId, row] of Object.entries(MATRIX)) {
      const summary = CALLERS.map((caller) => `${caller} ${show(row.expect[caller])}`).join(', ');
      it(`${operationId}: ${summary}`, async function () {
        this.timeout(60_000);
        const op = operations.get(operationId);
        if (!op) expect.fail(`${operationId} is not a project-scoped operation of the served contract`);
        const actual: Record<string, string> = {};
        const expected: Record<string, string> = {};
        for (const caller of CALLERS) {
          const f = row.freshPerCaller ? await fixture(people) : (shared ??= await fixture(people));
          actual[caller] = await runCell(op, f, caller, row);
          expected[caller] = show(row.expect[caller]);
        }
        expect(actual, `${op.method} ${op.path}`).to.deep.equal(expected);
      });
    }
  },
);
