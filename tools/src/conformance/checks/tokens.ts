/** API tokens: made, listed and revoked with a session only; they act for their user elsewhere. */
import { unknownUuid, type CaseDef } from '../case.js';
import { badPageSize, oneRequest, payloadTooLarge, sessionOf, sessionRequired, unauthenticated, unsupportedMediaType } from './common.js';

const group = 'api tokens';
const CREATE = 'POST /v1/auth/tokens';
const LIST = 'GET /v1/auth/tokens';
const DELETE = 'DELETE /v1/auth/tokens/{id}';

const API_TOKEN = /^api_[A-Za-z0-9_-]{43}$/;

export const tokenCases: CaseDef[] = [
  {
    group,
    op: CREATE,
    expect: '201',
    title: 'user A makes an API token that expires in a day; the token is shown once',
    run: async (t) => {
      const data = t.expect(
        await t.send({
          method: 'POST',
          path: '/v1/auth/tokens',
          token: sessionOf('a')(t),
          json: { name: `conformance ${t.state.tag}`, expires_in_days: 1 },
        }),
        201,
      );
      t.check(API_TOKEN.test(data.token ?? ''), 'the token is api_ and 43 URL-safe characters');
      t.check(data.name === `conformance ${t.state.tag}`, 'the name comes back');
      const hours = (Date.parse(data.expires_at) - Date.now()) / 3_600_000;
      t.check(hours > 23 && hours <= 24.01, `it expires in a day (expires_at ${data.expires_at})`);
      t.state.apiToken = { id: data.id, token: data.token };
      t.ledger.tokens.set(data.id, sessionOf('a')(t));
    },
  },
  {
    group,
    op: 'GET /v1/users/me',
    expect: '200',
    title: 'an API token acts for the user who made it',
    run: async (t) => {
      const data = t.expect(
        await t.send({ method: 'GET', path: '/v1/users/me', token: t.need(t.state.apiToken, 'an API token').token }),
        200,
      );
      t.check(data.id === t.state.a.id, "the token's user");
    },
  },
  sessionRequired(group, CREATE, () => '/v1/auth/tokens', { json: { name: 'from an API token' } }),
  oneRequest(group, CREATE, '400 invalid_request', 'an empty name and a lifetime of 0 days are refused, with details', (t) => ({
    method: 'POST',
    path: '/v1/auth/tokens',
    token: sessionOf('a')(t),
    json: { name: '', expires_in_days: 0 },
  })),
  unsupportedMediaType(group, CREATE, () => '/v1/auth/tokens', sessionOf('a')),
  payloadTooLarge(group, CREATE, () => '/v1/auth/tokens', sessionOf('a')),
  unauthenticated(group, CREATE, () => '/v1/auth/tokens', { json: { name: 'x' } }),
  {
    group,
    op: LIST,
    expect: '200',
    title: "lists the caller's tokens, never the token itself",
    run: async (t) => {
      const made = t.need(t.state.apiToken, 'an API token');
      const exchange = await t.send({ method: 'GET', path: '/v1/auth/tokens', token: sessionOf('a')(t) });
      const data = t.expect(exchange, 200);
      const item = data.items.find((i: { id: string }) => i.id === made.id);
      t.check(item, 'the new token is listed');
      t.check(!('token' in item) && !(exchange.text ?? '').includes(made.token), 'the listing does not hold the token');
    },
  },
  badPageSize(group, LIST, () => '/v1/auth/tokens', sessionOf('a'), 101),
  unauthenticated(group, LIST, () => '/v1/auth/tokens'),
  sessionRequired(group, LIST, () => '/v1/auth/tokens'),
  {
    group,
    op: DELETE,
    expect: '204',
    title: 'a revoked token is refused at once (401)',
    run: async (t) => {
      const session = sessionOf('a')(t);
      const made = t.expect(
        await t.send({ method: 'POST', path: '/v1/auth/tokens', token: session, json: { name: 'conformance, to revoke' } }),
        201,
      );
      t.ledger.tokens.set(made.id, session);
      const exchange = await t.send({ method: 'DELETE', path: `/v1/auth/tokens/${made.id}`, token: session });
      t.expect(exchange, 204);
      t.ledger.tokens.delete(made.id);
      t.expect(await t.send({ method: 'GET', path: '/v1/users/me', token: made.token }), 401, 'unauthenticated');
    },
  },
  oneRequest(group, DELETE, '400 invalid_request', 'an id that is not a UUID is refused', (t) => ({
    method: 'DELETE',
    path: '/v1/auth/tokens/not-a-uuid',
    token: sessionOf('a')(t),
  })),
  oneRequest(group, DELETE, '404 not_found', 'an id no token has is 404', (t) => ({
    method: 'DELETE',
    path: `/v1/auth/tokens/${unknownUuid()}`,
    token: sessionOf('a')(t),
  })),
  {
    group,
    op: DELETE,
    expect: '404 not_found',
    title: "another user's token id is 404",
    run: async (t) => {
      const made = t.need(t.state.apiToken, 'an API token');
      t.expect(await t.send({ method: 'DELETE', path: `/v1/auth/tokens/${made.id}`, token: sessionOf('b')(t) }), 404, 'not_found');
    },
  },
  unauthenticated(group, DELETE, () => `/v1/auth/tokens/${unknownUuid()}`),
  sessionRequired(group, DELETE, (t) => `/v1/auth/tokens/${t.need(t.state.apiToken, 'an API token').id}`),
];
