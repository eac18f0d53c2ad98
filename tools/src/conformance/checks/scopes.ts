/**
 * Narrowed API tokens: made for some projects and some scopes, they reach only those projects (any
 * other is 404, as to a non-member) and call only the operations whose `x-scope` their scopes
 * cover (403 `insufficient_scope` elsewhere, before anything is done). User A makes two tokens
 * limited to P1: one that may only publish, one that may only read. Then every operation an API
 * token may call is asked once with the token its scope does not allow.
 */
import type { CaseContext, CaseDef } from '../case.js';
import type { ContractModel } from '../contract.js';
import { concretePath, ns, sessionOf } from './common.js';

const group = 'scoped api tokens';
const CREATE = 'POST /v1/auth/tokens';
const LIST = 'GET /v1/auth/tokens';
const PUBLISH = 'POST /v1/projects/{namespace}/feeds/{feed}/events';

const publishToken = (t: CaseContext) => t.need(t.state.publishToken, 'a publish-only API token').token;
const readToken = (t: CaseContext) => t.need(t.state.readToken, 'a read-only API token').token;

/** Makes an API token of user A limited to P1 with these scopes, expiring in a day. */
async function makeToken(t: CaseContext, scopes: string[]): Promise<{ id: string; token: string }> {
  const session = sessionOf('a')(t);
  const p1 = ns(t);
  const data = t.expect(
    await t.send({
      method: 'POST',
      path: '/v1/auth/tokens',
      token: session,
      json: { name: `conformance ${scopes.join(' ')} ${t.state.tag}`, expires_in_days: 1, projects: [p1], scopes },
    }),
    201,
  );
  t.ledger.tokens.set(data.id, session);
  t.check(JSON.stringify(data.projects) === JSON.stringify([p1]), `the token is limited to P1 (projects ${JSON.stringify(data.projects)})`);
  t.check(
    JSON.stringify(data.scopes) === JSON.stringify(scopes),
    `the token has the scopes asked for (scopes ${JSON.stringify(data.scopes)})`,
  );
  return { id: data.id, token: data.token };
}

export function scopeCases(contract: ContractModel): CaseDef[] {
  const cases: CaseDef[] = [
    {
      group,
      op: CREATE,
      expect: '201',
      title: 'user A makes a publish-only token (events:write) limited to P1; the answer says so',
      run: async (t) => {
        t.state.publishToken = await makeToken(t, ['events:write']);
      },
    },
    {
      group,
      op: CREATE,
      expect: '201',
      title: 'user A makes a read-only token limited to P1',
      run: async (t) => {
        t.state.readToken = await makeToken(t, ['read']);
      },
    },
    {
      group,
      op: CREATE,
      expect: '400 invalid_request',
      title: "a namespace that is none of the caller's projects is refused, pointing at it, and no token is made",
      run: async (t) => {
        const session = sessionOf('a')(t);
        const name = `conformance refused ${t.state.tag}`;
        const exchange = await t.send({
          method: 'POST',
          path: '/v1/auth/tokens',
          token: session,
          json: { name, projects: [ns(t), `${t.state.tag}-nowhere`] },
        });
        t.expect(exchange, 400, 'invalid_request');
        const paths = ((exchange.json?.error?.details ?? []) as { path: string }[]).map((detail) => detail.path);
        t.check(JSON.stringify(paths) === '["/body/projects/1"]', `the details point at /body/projects/1 (got ${JSON.stringify(paths)})`);
        const list = t.expect(await t.send({ method: 'GET', path: '/v1/auth/tokens?limit=100', token: session }), 200);
        t.check(!list.items.some((item: { name: string }) => item.name === name), 'no token of that name was made');
      },
    },
    {
      group,
      op: LIST,
      expect: '200',
      title: "the list shows each token's projects (by namespace) and scopes",
      run: async (t) => {
        const made = t.need(t.state.publishToken, 'a publish-only API token');
        const list = t.expect(await t.send({ method: 'GET', path: '/v1/auth/tokens?limit=100', token: sessionOf('a')(t) }), 200);
        const item = list.items.find((i: { id: string }) => i.id === made.id);
        t.check(item, 'the publish-only token is listed');
        t.check(JSON.stringify(item.projects) === JSON.stringify([ns(t)]), `its projects are [P1] (got ${JSON.stringify(item.projects)})`);
        t.check(JSON.stringify(item.scopes) === '["events:write"]', `its scopes are [events:write] (got ${JSON.stringify(item.scopes)})`);
        const broad = list.items.find((i: { id: string }) => i.id === t.state.apiToken?.id);
        if (broad) {
          t.check(
            broad.projects === null && JSON.stringify(broad.scopes) === '["all"]',
            'a token made without either reaches every project with scope all',
          );
        }
      },
    },
    {
      group,
      op: PUBLISH,
      expect: '201',
      title: 'the publish-only token publishes to P1',
      run: async (t) => {
        const data = t.expect(
          await t.send({
            method: 'POST',
            path: `/v1/projects/${ns(t)}/feeds/general/events`,
            token: publishToken(t),
            json: { event: 'Published with a publish-only token', tags: { run: t.state.tag } },
          }),
          201,
        );
        t.state.events.push({ id: data.id, feed: data.feed });
      },
    },
    {
      group,
      op: 'GET /v1/projects/{namespace}/events',
      expect: '403 insufficient_scope',
      title: 'the publish-only token cannot read back the events it published',
      run: async (t) => {
        t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}/events`, token: publishToken(t) }), 403, 'insufficient_scope');
      },
    },
    {
      group,
      op: 'GET /v1/projects/{namespace}',
      expect: '404 not_found',
      title: 'a token limited to P1 reads P1, and finds no P2: 404, as a non-member',
      run: async (t) => {
        t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: readToken(t) }), 200);
        t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t, 'p2')}`, token: readToken(t) }), 404, 'not_found');
      },
    },
  ];
  // Every operation an API token may call, with a token whose scopes do not cover it: refused
  // before the path's project, the body or anything else is looked at.
  for (const op of contract.operations) {
    if (op.scope === undefined) continue;
    cases.push({
      group,
      op: op.key,
      expect: '403 insufficient_scope',
      title: `a token without scope ${op.scope} is refused`,
      run: async (t) => {
        const token = op.scope === 'read' ? publishToken(t) : readToken(t);
        const exchange = await t.send({ method: op.method, path: concretePath(op, ns(t)), token, ...(op.hasBody ? { json: {} } : {}) });
        t.expect(exchange, 403, 'insufficient_scope');
      },
    });
  }
  cases.push({
    group,
    op: 'DELETE /v1/auth/tokens/{id}',
    expect: '204',
    title: 'the narrowed tokens are revoked, and refused at once (401)',
    run: async (t) => {
      const session = sessionOf('a')(t);
      for (const made of [t.state.publishToken, t.state.readToken]) {
        if (!made) continue;
        t.expect(await t.send({ method: 'DELETE', path: `/v1/auth/tokens/${made.id}`, token: session }), 204);
        t.ledger.tokens.delete(made.id);
        t.expect(await t.send({ method: 'GET', path: `/v1/projects/${ns(t)}`, token: made.token }), 401, 'unauthenticated');
      }
      t.state.publishToken = undefined;
      t.state.readToken = undefined;
    },
  });
  return cases;
}
