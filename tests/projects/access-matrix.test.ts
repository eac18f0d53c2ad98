/**
 * The access matrix of every project-scoped operation, from ONE table: operationId × caller →
 * expected answer. The operations come from the contract the service serves
 * (`GET /v1/openapi.json`, every path under `/v1/projects/{namespace}`, and LogSnag's routes,
 * `x-logsnag`, which name their project in the body); an operation without a row
 * fails the suite, so a new project route cannot land without its access rules written down here.
 *
 * Each cell sends a valid request (existing ids and usernames, valid bodies), so the status tells
 * about access and nothing else. Rows whose success would spoil the shared project (delete it,
 * remove a member, accept or delete an invite, invite the spare user) get a fresh project per cell.
 *
 * A second table, at the end, holds the operations outside a project that need a credential (the
 * account, its sessions and API tokens, the project list) the same way.
 *
 * Both tables also call every operation with narrowed API tokens of the owner (or of the account):
 * one of each scope, one of scope `all` limited to the project, one limited to another project.
 * Their expected answers are not written per row but derived from the operation's `x-scope` in the
 * served contract and the token policy (policies/project.ts): session-only stays 403
 * `session_required`; a scope that does not cover the operation is 403 `insufficient_scope`; a
 * project outside the token's is 404 `not_found`, as to a non-member; and otherwise the answer is
 * the owner's broad API token's, written in the row.
 *
 * And with the owner's session in the `sb_session` cookie (login with `cookie: true`), sent without
 * `Authorization`: from the service's own origin it must get what the owner's session gets; from
 * another origin 403 `csrf_refused`; a cookie naming no session 401 (derived, not written per row).
 */
import { expect } from 'chai';
import { coversOperation, reachesProject, type Grant, type TokenScope } from '../../server/src/policies/project.js';
import { ContractModel, type Operation } from '../../tools/src/conformance/contract.js';
import { parseJson, requestInit } from '../../tools/src/conformance/http.js';
import { baseUrl, secret } from '../support/harness.js';
import { apiToken, signUp, uniqueName, type TestUser } from '../support/accounts.js';
import { call, expectData, http } from '../support/http.js';
import { addMember, createInsight, createProject, invite, namespaceName, projectPath } from '../support/projects.js';
import { contractModel } from '../support/response-check.js';

/** The callers whose answers each row writes out. */
const WRITTEN_CALLERS = ['owner', 'member', 'nonMember', 'invitee', 'ownerApiToken', 'noToken', 'malformedToken'] as const;
type WrittenCaller = (typeof WRITTEN_CALLERS)[number];
/** The owner's narrowed API tokens, whose answers are derived (`scopedOutcome`). */
const TOKEN_CALLERS = ['readToken', 'eventsWriteToken', 'insightsWriteToken', 'allHereToken', 'allElsewhereToken'] as const;
type TokenCaller = (typeof TOKEN_CALLERS)[number];
/** The owner's session in the `sb_session` cookie: from this origin, from another, and a cookie of no session. */
const COOKIE_CALLERS = ['ownerCookie', 'ownerCookieCrossOrigin', 'unknownCookie'] as const;
type CookieCaller = (typeof COOKIE_CALLERS)[number];
const CALLERS = [...WRITTEN_CALLERS, ...TOKEN_CALLERS, ...COOKIE_CALLERS] as const;
type Caller = (typeof CALLERS)[number];

/** Each narrowed token: what it was made with. `here`: limited to the cell's project; `elsewhere`: to another project of the owner. */
const TOKEN_GRANTS: Record<TokenCaller, { scopes: TokenScope[]; projects?: 'here' | 'elsewhere' }> = {
  readToken: { scopes: ['read'] },
  eventsWriteToken: { scopes: ['events:write'] },
  insightsWriteToken: { scopes: ['insights:write'] },
  allHereToken: { scopes: ['all'], projects: 'here' },
  allElsewhereToken: { scopes: ['all'], projects: 'elsewhere' },
};

/** A success status, or an error status with its code. */
type Outcome = 200 | 201 | 202 | 204 | readonly [status: number, code: string];
type Row = {
  /** A fresh project for every caller, because one caller's success would change the fixture for the next. */
  freshPerCaller?: boolean;
  /** Path parameters other than `namespace`, query string and JSON body of a valid request. */
  request: (f: Fixture, caller: Caller) => Promise<Request> | Request;
  expect: Record<WrittenCaller, Outcome>;
};
type Request = { params?: Record<string, string>; query?: string; body?: unknown };

// ----- the outcomes, by rule -----
const UNAUTHENTICATED = [401, 'unauthenticated'] as const;
const NOT_FOUND = [404, 'not_found'] as const;
const NOT_OWNER = [403, 'not_owner'] as const;
const FORBIDDEN = [403, 'forbidden'] as const;
const SESSION_REQUIRED = [403, 'session_required'] as const;
const INSUFFICIENT_SCOPE = [403, 'insufficient_scope'] as const;
const BILLING_OFF = [503, 'unavailable'] as const;
const CSRF_REFUSED = [403, 'csrf_refused'] as const;

/** What a page of the service sends with its cookie (`Sec-Fetch-Site`), and what a page elsewhere sends (`Origin`). */
const FROM: Record<'here' | 'elsewhere', Record<string, string>> = {
  here: { 'Sec-Fetch-Site': 'same-origin' },
  elsewhere: { Origin: 'https://elsewhere.example' },
};

/** The headers of a cookie caller: its cookie (`token`, or one of no session) and where it comes from. */
function cookieHeaders(token: string, caller: 'cookie' | 'cookieCrossOrigin' | 'unknownCookie'): Record<string, string> {
  if (caller === 'unknownCookie') return { Cookie: `sb_session=ses_${'0'.repeat(43)}`, ...FROM.here };
  return { Cookie: `sb_session=${token}`, ...FROM[caller === 'cookie' ? 'here' : 'elsewhere'] };
}

/** What a cookie caller must get: the session's answer from this origin, csrf_refused from another, 401 for no session. */
function cookieOutcome(caller: 'cookie' | 'cookieCrossOrigin' | 'unknownCookie', session: Outcome): Outcome {
  return caller === 'cookie' ? session : caller === 'cookieCrossOrigin' ? CSRF_REFUSED : UNAUTHENTICATED;
}

/** A new session of `user` in the `sb_session` cookie (login with `cookie: true`): the cookie's value. */
async function cookieSession(user: TestUser): Promise<string> {
  const answer = await call('POST', '/v1/auth/login', undefined, { login: user.username, password: user.password, cookie: true });
  expectData(answer, 201, 'login with cookie: true');
  return secret(/^sb_session=([^;]+);/.exec(answer.headers.getSetCookie()[0] ?? '')?.[1]);
}

const anonymous = { noToken: UNAUTHENTICATED, malformedToken: UNAUTHENTICATED } as const;
/** A project the caller is not a member of does not exist for it. */
const outsiders = { nonMember: NOT_FOUND, invitee: NOT_FOUND } as const;

/** Any member may. */
function members(ok: Outcome): Record<WrittenCaller, Outcome> {
  return { owner: ok, member: ok, ownerApiToken: ok, ...outsiders, ...anonymous };
}
/** The owner alone; a member is told so. */
function ownerOnly(ok: Outcome): Record<WrittenCaller, Outcome> {
  return { owner: ok, member: NOT_OWNER, ownerApiToken: ok, ...outsiders, ...anonymous };
}

/**
 * A narrowed token's answer, from the policy: a session-only operation refuses every API token; a
 * scope that does not cover the operation (`x-scope`) is 403 before anything else; a project the
 * token does not reach does not exist for it; past those, it gets what the broad token of the same
 * user gets (`broad`).
 */
function scopedOutcome(op: Operation, grant: Grant, projectId: string | undefined, broad: Outcome): Outcome {
  if (op.sessionOnly) return SESSION_REQUIRED;
  const namesProject = op.path.includes('{namespace}');
  if (!coversOperation(grant, op.scope as TokenScope, namesProject)) return INSUFFICIENT_SCOPE;
  if (projectId !== undefined && !reachesProject(grant, projectId)) return NOT_FOUND;
  return broad;
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
  countEvents: { request: () => ({ query: '?interval=day' }), expect: members(200) },
  identifyEndUser: {
    request: (_f, caller) => ({ params: { user_id: `matrix-${caller}` }, body: { properties: { plan: 'pro' } } }),
    expect: members(200),
  },
  getEndUser: {
    // An end user the owner identified, so that the project knows it.
    request: async (f) => {
      expectData(await call('PUT', projectPath(f.namespace, '/users/matrix-known'), f.owner.token, { properties: {} }), 200, 'identify');
      return { params: { user_id: 'matrix-known' } };
    },
    expect: members(200),
  },
  // LogSnag's routes (spec/logsnag.tsp) name the project in the body, as `project`.
  logsnagLog: {
    request: (f, caller) => ({ body: { project: f.namespace, channel: `logsnag-${caller.toLowerCase()}`, event: 'Signed up' } }),
    expect: members(200),
  },
  logsnagSetInsight: {
    request: (f, caller) => ({ body: { project: f.namespace, title: `Set by ${caller}`, value: 1 } }),
    expect: members(200),
  },
  logsnagIncrementInsight: {
    request: (f) => ({ body: { project: f.namespace, title: 'Counted', value: { $inc: 1 } } }),
    expect: members(200),
  },
  logsnagIdentify: {
    request: (f) => ({ body: { project: f.namespace, user_id: 'matrix-user', properties: { plan: 'pro' } } }),
    expect: members(200),
  },
  // Webhook endpoints: any member manages them. The project's endpoint and its delivery (of an event
  // published to it) are made once, on first use; sends go to a name that never resolves, so a test
  // or a retry answers at once with its `error`. A project holds at most 10 endpoints: createWebhook
  // adds one per success, and deleteWebhook deletes one the previous cell left if one is there.
  listWebhooks: { request: () => ({ query: '?limit=10' }), expect: members(200) },
  createWebhook: {
    request: (_f, caller) => ({ body: { url: `https://hooks.example.com/x?by=${caller}`, description: `Made by ${caller}` } }),
    expect: members(201),
  },
  getWebhook: { request: async (f) => ({ params: { webhook_id: (await f.webhook()).id } }), expect: members(200) },
  updateWebhook: {
    request: async (f, caller) => ({ params: { webhook_id: (await f.webhook()).id }, body: { description: `Changed by ${caller}` } }),
    expect: members(200),
  },
  deleteWebhook: { request: async (f) => ({ params: { webhook_id: await f.webhookToDelete() } }), expect: members(204) },
  rotateWebhookSecret: { request: async (f) => ({ params: { webhook_id: (await f.webhook()).id } }), expect: members(200) },
  testWebhook: { request: async (f) => ({ params: { webhook_id: (await f.webhook()).id } }), expect: members(200) },
  listWebhookDeliveries: {
    request: async (f) => ({ params: { webhook_id: (await f.webhook()).id }, query: '?limit=10' }),
    expect: members(200),
  },
  retryWebhookDelivery: {
    request: async (f) => {
      const { id, deliveryId } = await f.webhook();
      return { params: { webhook_id: id, delivery_id: deliveryId } };
    },
    expect: members(200),
  },
  recoverWebhook: {
    // Since a minute from now: nothing to queue again, so the cells add no deliveries.
    request: async (f) => ({
      params: { webhook_id: (await f.webhook()).id },
      body: { since: new Date(Date.now() + 60_000).toISOString() },
    }),
    expect: members(200),
  },
  // A stream: the cell reads its status and headers, then lets go.
  streamEvents: { request: () => ({}), expect: members(200) },
  // The run's server has billing off (no STRIPE_SECRET_KEY): past the access rules, the owner's
  // answer is 503 `unavailable`, which shows the rules let it through. tests/billing/billing-checkout.test.ts
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
  /** Another project of the owner's, the one `allElsewhereToken` is limited to. */
  elsewhereId: string;
  /** The owner's narrowed tokens that do not depend on the cell's project. */
  readToken: string;
  eventsWriteToken: string;
  insightsWriteToken: string;
  allElsewhereToken: string;
  /** The owner's session in the `sb_session` cookie. */
  ownerCookie: string;
}

interface Fixture extends People {
  namespace: string;
  projectId: string;
  /**
   * The owner's token of scope `all` limited to this project, made when a cell first calls with it
   * (a token per fixture would pass the cap on a user's API tokens).
   */
  allHereToken: () => Promise<string>;
  newInsight: () => Promise<{ id: string }>;
  /** A new feed's name. */
  newFeed: () => Promise<string>;
  /** The project's webhook endpoint and a delivery of it, made on first use. */
  webhook: () => Promise<{ id: string; deliveryId: string }>;
  /** An endpoint no other row uses: the one the previous cell left, or a new one. */
  webhookToDelete: () => Promise<string>;
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
    projectId: project.id,
    allHereToken: once(() => narrowedToken(people.owner.token, 'allHereToken', namespace)),
    newInsight: () => createInsight(people.owner.token, namespace, { title: 'Target', value: 10 }),
    newFeed: async () => {
      feeds += 1;
      const name = `target-${feeds}`;
      expectData(await call('POST', projectPath(namespace, '/feeds'), people.owner.token, { name }), 201, 'create feed');
      return name;
    },
    webhook: once(() => newWebhook(people.owner.token, namespace, true)),
    webhookToDelete: async () => {
      const left = spareWebhooks.get(namespace);
      if (left !== undefined && (await call('GET', projectPath(namespace, `/webhooks/${left}`), people.owner.token)).status === 200)
        return left;
      const { id } = await newWebhook(people.owner.token, namespace, false);
      spareWebhooks.set(namespace, id);
      return id;
    },
  };
}

/** The endpoint deleteWebhook's cells address, per project: made anew only once a cell deleted it. */
const spareWebhooks = new Map<string, string>();

/**
 * A webhook endpoint of the project, made by its owner, to a name that never resolves (`.invalid`);
 * with `withDelivery`, also a delivery of it (an event published to the project is one), and its id.
 */
async function newWebhook(session: string, namespace: string, withDelivery: boolean): Promise<{ id: string; deliveryId: string }> {
  const webhooks = projectPath(namespace, '/webhooks');
  const { id } = expectData(await call('POST', webhooks, session, { url: 'https://hooks.invalid/matrix' }), 201, 'create webhook');
  if (!withDelivery) return { id, deliveryId: '' };
  expectData(await call('POST', projectPath(namespace, '/feeds/general/events'), session, { event: 'For the webhook' }), 201, 'publish');
  const deliveries = expectData(await call('GET', `${webhooks}/${id}/deliveries`, session)).items as { id: string }[];
  expect(deliveries, 'the delivery of the event published').to.have.length(1);
  return { id, deliveryId: deliveries[0]!.id };
}

/** A new API token of the session's user made as `TOKEN_GRANTS[caller]` says; `project`: the namespace it is limited to, if any. */
async function narrowedToken(session: string, caller: TokenCaller, project?: string): Promise<string> {
  const body = { name: caller, scopes: TOKEN_GRANTS[caller].scopes, ...(project === undefined ? {} : { projects: [project] }) };
  const data = expectData(await call('POST', '/v1/auth/tokens', session, body), 201, `make ${caller}`);
  return secret(data.token as string);
}

/** The grant a narrowed token of the cell has, for the policy to judge. */
function grantOf(f: Fixture, caller: TokenCaller): Grant {
  const { scopes, projects } = TOKEN_GRANTS[caller];
  return { scopes, projectIds: projects === undefined ? undefined : new Set([projects === 'here' ? f.projectId : f.elsewhereId]) };
}

/** `make`'s promise, made on the first call. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
}

async function authorization(f: Fixture, caller: Caller): Promise<string | undefined> {
  switch (caller) {
    case 'ownerCookie':
    case 'ownerCookieCrossOrigin':
    case 'unknownCookie':
      return undefined;
    case 'allHereToken':
      return `Bearer ${await f.allHereToken()}`;
    case 'ownerApiToken':
    case 'readToken':
    case 'eventsWriteToken':
    case 'insightsWriteToken':
    case 'allElsewhereToken':
      return `Bearer ${f[caller]}`;
    case 'noToken':
      return undefined;
    case 'malformedToken':
      return 'Bearer not-a-token';
    default:
      return `Bearer ${f[caller].token}`;
  }
}

/** What `caller` must get on `op` in the cell `f`: written in the row, or derived for a narrowed token. */
function expectedOutcome(op: Operation, f: Fixture, caller: Caller, row: Row): Outcome {
  if ((WRITTEN_CALLERS as readonly string[]).includes(caller)) return row.expect[caller as WrittenCaller];
  if ((COOKIE_CALLERS as readonly string[]).includes(caller)) return cookieOutcome(cookieKind(caller as CookieCaller), row.expect.owner);
  return scopedOutcome(op, grantOf(f, caller as TokenCaller), f.projectId, row.expect.ownerApiToken);
}

/** One cell: the answer as "<status> <code>" (or the bare status on success), with what the contract's judge finds in it appended. */
async function runCell(op: Operation, f: Fixture, caller: Caller, row: Row): Promise<string> {
  const request = await row.request(f, caller);
  const headers = (COOKIE_CALLERS as readonly string[]).includes(caller)
    ? cookieHeaders(f.ownerCookie, cookieKind(caller as CookieCaller))
    : {};
  return answerOf(op, { namespace: f.namespace, ...request.params }, await authorization(f, caller), request, headers);
}

function cookieKind(caller: CookieCaller): 'cookie' | 'cookieCrossOrigin' | 'unknownCookie' {
  return caller === 'ownerCookie' ? 'cookie' : caller === 'ownerCookieCrossOrigin' ? 'cookieCrossOrigin' : 'unknownCookie';
}

/** Sends `op` with these path parameters, `Authorization` and other headers; the answer as `runCell` shows it. */
async function answerOf(
  op: Operation,
  params: Record<string, string>,
  auth: string | undefined,
  request: Request,
  headers: Record<string, string> = {},
): Promise<string> {
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`the row of ${op.operationId} gives no value for {${name}}`);
    return encodeURIComponent(value);
  });
  const sent = {
    method: op.method,
    path: path + (request.query ?? ''),
    headers,
    ...(auth ? { authorization: auth } : {}),
    json: request.body,
  };
  // A time limit, and an event stream read only as far as its headers.
  const response = await fetch(baseUrl() + sent.path, requestInit(sent, { signal: AbortSignal.timeout(10_000) }));
  const stream = response.headers.get('content-type')?.startsWith('text/event-stream');
  const text = stream ? undefined : await response.text();
  if (stream) await response.body?.cancel();
  const problems = contractModel().judge({ method: op.method, path, status: response.status, headers: response.headers, body: text });
  const code = response.status >= 300 ? ` ${parseJson(text)?.error?.code}` : '';
  return `${response.status}${code}${problems.length ? ` (${problems.join('; ')})` : ''}`;
}

/** The operation acts on a project: its path names one, or (LogSnag's routes, `x-logsnag`) its body does. */
function namesProject(document: any, op: Operation): boolean {
  return op.path.startsWith('/v1/projects/{namespace}') || document.paths[op.path]?.[op.method.toLowerCase()]?.['x-logsnag'] === true;
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
      const projectScoped = new ContractModel(served.json).operations.filter((op) => namesProject(served.json, op));
      operations = new Map(projectScoped.map((op) => [op.operationId, op]));
      const [owner, member, other, nonMember, invitee, spare] = await Promise.all(Array.from({ length: 6 }, () => signUp()));
      people = {
        owner: owner!,
        member: member!,
        other: other!,
        nonMember: nonMember!,
        invitee: invitee!,
        spare: spare!,
        ownerApiToken: await apiToken(owner!.token),
        elsewhereId: '',
        readToken: await narrowedToken(owner!.token, 'readToken'),
        eventsWriteToken: await narrowedToken(owner!.token, 'eventsWriteToken'),
        insightsWriteToken: await narrowedToken(owner!.token, 'insightsWriteToken'),
        allElsewhereToken: '',
        ownerCookie: await cookieSession(owner!),
      };
      const elsewhere = await createProject(people.owner.token, { name: 'Elsewhere' });
      people.elsewhereId = elsewhere.id;
      people.allElsewhereToken = await narrowedToken(people.owner.token, 'allElsewhereToken', elsewhere.namespace);
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
      const summary = WRITTEN_CALLERS.map((caller) => `${caller} ${show(row.expect[caller])}`).join(', ');
      it(`${operationId}: ${summary}; narrowed tokens by x-scope; the session cookie`, async function () {
        this.timeout(120_000);
        const op = operations.get(operationId);
        if (!op) expect.fail(`${operationId} is not a project-scoped operation of the served contract`);
        const actual: Record<string, string> = {};
        const expected: Record<string, string> = {};
        for (const caller of CALLERS) {
          const f = row.freshPerCaller ? await fixture(people) : (shared ??= await fixture(people));
          actual[caller] = await runCell(op, f, caller, row);
          expected[caller] = show(expectedOutcome(op, f, caller, row));
        }
        expect(actual, `${op.method} ${op.path}`).to.deep.equal(expected);
      });
    }
  },
);

// ----- the second table: operations outside a project that need a credential -----

/**
 * Every operation of the served contract that needs a credential and is not under
 * `/v1/projects/{namespace}` (the account, its credentials, the project list), × caller. As above,
 * an operation without a row fails the suite. Public operations (sign-up, login, the password
 * reset) have no row: they take no credential, and their own tests show one sent is ignored.
 */
const WRITTEN_ACCOUNT_CALLERS = ['session', 'apiToken', 'otherUserSession', 'noToken', 'malformedToken'] as const;
type WrittenAccountCaller = (typeof WRITTEN_ACCOUNT_CALLERS)[number];
/** The account's narrowed API tokens, whose answers are derived: two scopes, and `all` limited to a project of the account. */
const ACCOUNT_TOKEN_CALLERS = ['readToken', 'eventsWriteToken', 'allLimitedToken'] as const;
type AccountTokenCaller = (typeof ACCOUNT_TOKEN_CALLERS)[number];
/** The account's session in the `sb_session` cookie: from this origin, from another, and a cookie of no session. */
const ACCOUNT_COOKIE_CALLERS = ['cookie', 'cookieCrossOrigin', 'unknownCookie'] as const;
type AccountCookieCaller = (typeof ACCOUNT_COOKIE_CALLERS)[number];
const ACCOUNT_CALLERS = [...WRITTEN_ACCOUNT_CALLERS, ...ACCOUNT_TOKEN_CALLERS, ...ACCOUNT_COOKIE_CALLERS] as const;
type AccountCaller = (typeof ACCOUNT_CALLERS)[number];
const ACCOUNT_TOKEN_SCOPES: Record<AccountTokenCaller, TokenScope[]> = {
  readToken: ['read'],
  eventsWriteToken: ['events:write'],
  allLimitedToken: ['all'],
};

interface AccountFixture {
  /** The account the credentials `session` and `apiToken` belong to, and whose resources the rows name. */
  user: TestUser;
  apiToken: string;
  /** Another account, with a session of its own. */
  other: TestUser;
  /** A second session of `user`, other than the calling one. */
  secondSessionId: string;
  /** A second API token of `user`, other than the calling one. */
  secondApiTokenId: string;
  /** The narrowed token the cell calls with, if its caller is one (`allLimitedToken`: limited to a project of `user`'s). */
  narrowed?: { token: string; grant: Grant };
  /** A session of `user` in the `sb_session` cookie, if the cell's caller is a cookie. */
  cookie?: string;
}

type AccountRow = {
  /** Path parameters, query string and JSON body of a valid request, made for this caller. */
  request: (f: AccountFixture, caller: AccountCaller) => Request;
  expect: Record<WrittenAccountCaller, Outcome>;
};

/** Any credential of its own account. */
function anyCredential(ok: Outcome): Record<WrittenAccountCaller, Outcome> {
  return { session: ok, apiToken: ok, otherUserSession: ok, ...anonymous };
}
/** A session only; an API token is told so. */
function sessionOnly(ok: Outcome): Record<WrittenAccountCaller, Outcome> {
  return { ...anyCredential(ok), apiToken: SESSION_REQUIRED };
}
/** A session only, on a resource of `user`: another user's session does not find it. */
function ownSessionOnly(ok: Outcome): Record<WrittenAccountCaller, Outcome> {
  return { ...sessionOnly(ok), otherUserSession: NOT_FOUND };
}

/** The password of the account the caller acts for. */
function passwordOf(f: AccountFixture, caller: AccountCaller): string {
  return caller === 'otherUserSession' ? f.other.password : f.user.password;
}

const ACCOUNT_MATRIX: Record<string, AccountRow> = {
  getCurrentUser: { request: () => ({}), expect: anyCredential(200) },
  updateCurrentUser: { request: () => ({ body: { username: uniqueName('matrix') } }), expect: anyCredential(200) },
  changePassword: {
    request: (f, caller) => ({ body: { current_password: passwordOf(f, caller), new_password: `changed-${caller}-password` } }),
    expect: sessionOnly(204),
  },
  changeEmail: {
    request: (f, caller) => ({ body: { email: `${uniqueName('matrix')}@example.com`, current_password: passwordOf(f, caller) } }),
    expect: sessionOnly(202),
  },
  listReceivedInvites: { request: () => ({ query: '?limit=10' }), expect: anyCredential(200) },
  logout: { request: () => ({}), expect: sessionOnly(204) },
  createApiToken: { request: (_f, caller) => ({ body: { name: `Made by ${caller}` } }), expect: sessionOnly(201) },
  listApiTokens: { request: () => ({ query: '?limit=10' }), expect: sessionOnly(200) },
  deleteApiToken: { request: (f) => ({ params: { id: f.secondApiTokenId } }), expect: ownSessionOnly(204) },
  listSessions: { request: () => ({ query: '?limit=10' }), expect: sessionOnly(200) },
  deleteCurrentUser: { request: (f, caller) => ({ body: { password: passwordOf(f, caller) } }), expect: sessionOnly(204) },
  deleteSession: { request: (f) => ({ params: { id: f.secondSessionId } }), expect: ownSessionOnly(204) },
  createProject: {
    request: (_f, caller) => ({ body: { name: `Made by ${caller}`, namespace: namespaceName() } }),
    expect: anyCredential(201),
  },
  listProjects: { request: () => ({ query: '?limit=10' }), expect: anyCredential(200) },
};

/** A fresh account per cell: most rows' success (a logout, a new password, an ended session) spends the fixture. */
async function accountFixture(caller: AccountCaller): Promise<AccountFixture> {
  const [user, other] = await Promise.all([signUp(), signUp()]);
  const [apiTokenValue] = await Promise.all([apiToken(user.token), apiToken(user.token, 'second')]);
  const narrowed = (ACCOUNT_TOKEN_CALLERS as readonly string[]).includes(caller)
    ? await accountToken(user.token, caller as AccountTokenCaller)
    : undefined;
  // Before the second session, which is then the newest of those the calling one does not hold.
  const cookie = (ACCOUNT_COOKIE_CALLERS as readonly string[]).includes(caller) ? await cookieSession(user) : undefined;
  const second = expectData(await call('POST', '/v1/auth/login', undefined, { login: user.username, password: user.password }), 201);
  secret(second.token as string);
  const tokens = expectData(await call('GET', '/v1/auth/tokens', user.token)).items as { id: string; name: string }[];
  const sessions = expectData(await call('GET', '/v1/auth/sessions', user.token)).items as { id: string; current: boolean }[];
  return {
    user: user,
    apiToken: apiTokenValue,
    other: other,
    secondSessionId: sessions.find((session) => !session.current)!.id,
    secondApiTokenId: tokens.find((token) => token.name === 'second')!.id,
    ...(narrowed ? { narrowed } : {}),
    ...(cookie ? { cookie } : {}),
  };
}

/** A narrowed token of the session's user, and its grant; `allLimitedToken` is limited to a new project of the user's. */
async function accountToken(session: string, caller: AccountTokenCaller): Promise<{ token: string; grant: Grant }> {
  const scopes = ACCOUNT_TOKEN_SCOPES[caller];
  const project = caller === 'allLimitedToken' ? await createProject(session, { name: 'Limited to' }) : undefined;
  const body = { name: caller, scopes, ...(project ? { projects: [project.namespace] } : {}) };
  const data = expectData(await call('POST', '/v1/auth/tokens', session, body), 201, `make ${caller}`);
  return { token: secret(data.token as string), grant: { scopes, projectIds: project ? new Set([project.id as string]) : undefined } };
}

function accountAuthorization(f: AccountFixture, caller: AccountCaller): string | undefined {
  switch (caller) {
    case 'session':
      return `Bearer ${f.user.token}`;
    case 'apiToken':
      return `Bearer ${f.apiToken}`;
    case 'otherUserSession':
      return `Bearer ${f.other.token}`;
    case 'noToken':
      return undefined;
    case 'malformedToken':
      return 'Bearer not-a-token';
    case 'readToken':
    case 'eventsWriteToken':
    case 'allLimitedToken':
      return `Bearer ${f.narrowed!.token}`;
    case 'cookie':
    case 'cookieCrossOrigin':
    case 'unknownCookie':
      return undefined;
  }
}

describe(
  `access matrix: ${Object.keys(ACCOUNT_MATRIX).length} account operations × ${ACCOUNT_CALLERS.length} callers = ` +
    `${Object.keys(ACCOUNT_MATRIX).length * ACCOUNT_CALLERS.length} cells`,
  () => {
    let operations: Map<string, Operation>;

    before(async () => {
      const served = await http('GET', '/v1/openapi.json');
      expect(served.status).to.equal(200);
      const accountScoped = new ContractModel(served.json).operations.filter((op) => !op.isPublic && !namesProject(served.json, op));
      operations = new Map(accountScoped.map((op) => [op.operationId, op]));
    });

    it('has a row for every operation outside a project that needs a credential (but those being added now), and no row for anything else', () => {
      const served = [...operations.keys()].sort();
      expect(served.length).to.be.greaterThan(0);
      const withoutRow = served.filter((id) => !(id in ACCOUNT_MATRIX));
      const withoutOperation = Object.keys(ACCOUNT_MATRIX).filter((id) => !operations.has(id));
      expect({ withoutRow, withoutOperation }).to.deep.equal({ withoutRow: [], withoutOperation: [] });
    });

    for (const [operationId, row] of Object.entries(ACCOUNT_MATRIX)) {
      const summary = WRITTEN_ACCOUNT_CALLERS.map((caller) => `${caller} ${show(row.expect[caller])}`).join(', ');
      it(`${operationId}: ${summary}; narrowed tokens by x-scope; the session cookie`, async function () {
        this.timeout(120_000);
        const op = operations.get(operationId);
        if (!op) expect.fail(`${operationId} is not an operation outside a project that needs a credential`);
        const actual: Record<string, string> = {};
        const expected: Record<string, string> = {};
        for (const caller of ACCOUNT_CALLERS) {
          const f = await accountFixture(caller);
          const request = row.request(f, caller);
          const cookie = (ACCOUNT_COOKIE_CALLERS as readonly string[]).includes(caller) ? (caller as AccountCookieCaller) : undefined;
          const headers = cookie ? cookieHeaders(f.cookie!, cookie) : {};
          actual[caller] = await answerOf(op, request.params ?? {}, accountAuthorization(f, caller), request, headers);
          expected[caller] = show(
            cookie
              ? cookieOutcome(cookie, row.expect.session)
              : f.narrowed
                ? scopedOutcome(op, f.narrowed.grant, undefined, row.expect.apiToken)
                : row.expect[caller as WrittenAccountCaller],
          );
        }
        expect(actual, `${op.method} ${op.path}`).to.deep.equal(expected);
      });
    }
  },
);
