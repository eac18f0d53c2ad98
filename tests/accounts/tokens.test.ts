/**
 * API tokens: minted, listed and revoked with a session token only; they act for their
 * user elsewhere, are stored only as a SHA-256 hash, and stop working at once when revoked or expired.
 */
import { expect } from 'chai';
import { client, secret, sha256, sql } from '../support/harness.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { call, DAY_MS, expectCloseTo, expectError, expectInvalid, http, ISO_UTC, UUID7, type Answer } from '../support/http.js';

const API_TOKEN = /^api_[A-Za-z0-9_-]{43}$/;

interface Created {
  id: string;
  name: string;
  token: string;
  created_at: string;
  expires_at: string | null;
  projects: string[] | null;
  scopes: string[];
}

function postToken(token: string, body: unknown): Promise<Answer> {
  return call('POST', '/v1/auth/tokens', token, body);
}

function listTokens(token: string, query = ''): Promise<Answer> {
  return call('GET', `/v1/auth/tokens${query}`, token);
}

function deleteToken(token: string, id: string): Promise<Answer> {
  return call('DELETE', `/v1/auth/tokens/${id}`, token);
}

function me(token: string): Promise<Answer> {
  return call('GET', '/v1/users/me', token);
}

async function mint(sessionToken: string, body: { name: string; expires_in_days?: number }): Promise<Created> {
  const { data, error, response } = await client(sessionToken).POST('/v1/auth/tokens', { body });
  expect(response.status, JSON.stringify(error)).to.equal(201);
  secret(data!.data.token);
  return data!.data;
}

async function tokenRows(userId: string) {
  return sql<{
    id: string;
    user_id: string;
    name: string;
    token_hash: string;
    created_at: Date;
    last_used_at: Date | null;
    expires_at: Date | null;
  }>('select id, user_id, name, token_hash, created_at, last_used_at, expires_at from api_tokens where user_id = ? order by id', [userId]);
}

async function rowById(id: string) {
  return (
    await sql<{ id: string; token_hash: string; last_used_at: Date | null }>(
      'select id, token_hash, last_used_at from api_tokens where id = ?',
      [id],
    )
  )[0];
}

describe('POST /v1/auth/tokens', () => {
  let user: TestUser;
  before(async () => {
    user = await signUp();
  });

  it('answers 201 with exactly id, name, token, created_at, expires_at null, projects null and scopes ["all"]', async () => {
    const before = Date.now();
    const { data, response } = await client(user.token).POST('/v1/auth/tokens', { body: { name: 'ci deploy' } });
    expect(response.status).to.equal(201);
    expect(data).to.have.all.keys('success', 'data');
    expect(data!.success).to.equal(true);
    const created = data!.data;
    secret(created.token);
    expect(created).to.have.all.keys('id', 'name', 'token', 'created_at', 'expires_at', 'projects', 'scopes');
    expect(created.id).to.match(UUID7);
    expect(created.name).to.equal('ci deploy');
    expect(created.token).to.match(API_TOKEN);
    expect(created.created_at).to.match(ISO_UTC);
    expectCloseTo(created.created_at, before, 60_000, 'created_at');
    expect(created.expires_at).to.equal(null);
    expect(created.projects).to.equal(null);
    expect(created.scopes).to.deep.equal(['all']);
  });

  it('sets expires_at to now plus expires_in_days', async () => {
    const before = Date.now();
    const created = await mint(user.token, { name: 'three days', expires_in_days: 3 });
    expect(created.expires_at).to.be.a('string').that.matches(ISO_UTC);
    expectCloseTo(created.expires_at!, before + 3 * DAY_MS, 60_000, 'expires_at');
    const row = (await tokenRows(user.id)).find((r) => r.id === created.id)!;
    expect(new Date(row.expires_at!).toISOString()).to.equal(created.expires_at);
  });

  it('stores only the SHA-256 of the token, for the caller', async () => {
    const created = await mint(user.token, { name: 'hashed' });
    const rows = await sql<Record<string, unknown>>('select * from api_tokens where id = ?', [created.id]);
    expect(rows).to.have.length(1);
    const row = rows[0]!;
    expect(row.token_hash).to.equal(sha256(created.token));
    expect(row.user_id).to.equal(user.id);
    expect(row.name).to.equal('hashed');
    expect(row.last_used_at).to.equal(null);
    expect(JSON.stringify(row)).to.not.include(created.token);
    expect(JSON.stringify(row)).to.not.include(created.token.slice(4));
  });

  it('gives a token that acts for its user on GET /v1/users/me', async () => {
    const created = await mint(user.token, { name: 'reader' });
    const answer = await me(created.token);
    expect(answer.status).to.equal(200);
    expect(answer.json).to.deep.equal((await me(user.token)).json);
    expect(answer.json.data.id).to.equal(user.id);
  });

  describe('validation: 400 invalid_request pointing at the field, and nothing stored', () => {
    const cases: [string, unknown, string][] = [
      ['a missing name', { expires_in_days: 3 }, '/body/name'],
      ['an empty name', { name: '' }, '/body/name'],
      ['a name of 101 characters', { name: 'n'.repeat(101) }, '/body/name'],
      ['a name that is not a string', { name: 42 }, '/body/name'],
      ['expires_in_days of 0', { name: 'zero', expires_in_days: 0 }, '/body/expires_in_days'],
      ['expires_in_days of 3651', { name: 'too long', expires_in_days: 3651 }, '/body/expires_in_days'],
      ['expires_in_days that is not a whole number', { name: 'fraction', expires_in_days: 1.5 }, '/body/expires_in_days'],
      ['a field the contract does not define', { name: 'extra', permissions: ['all'] }, '/body/permissions'],
    ];
    for (const [rule, body, path] of cases) {
      it(`refuses ${rule}`, async () => {
        const fresh = await signUp();
        const answer = await postToken(fresh.token, body);
        expectInvalid(answer, path);
        expect(await tokenRows(fresh.id)).to.have.length(0);
      });
    }

    it('accepts the edges: a name of 100 characters, expires_in_days of 1 and of 3650', async () => {
      const fresh = await signUp();
      const before = Date.now();
      const long = await mint(fresh.token, { name: 'n'.repeat(100), expires_in_days: 3650 });
      expect(long.name).to.equal('n'.repeat(100));
      expectCloseTo(long.expires_at!, before + 3650 * DAY_MS, 60_000, 'expires_at');
      const short = await mint(fresh.token, { name: 'x', expires_in_days: 1 });
      expectCloseTo(short.expires_at!, before + DAY_MS, 60_000, 'expires_at');
      expect(await tokenRows(fresh.id)).to.have.length(2);
    });

    it('refuses a body that is not JSON with 415, and a missing one with 400', async () => {
      const fresh = await signUp();
      const textPlain = await http('POST', '/v1/auth/tokens', {
        headers: { Authorization: `Bearer ${fresh.token}`, 'Content-Type': 'text/plain' },
        body: JSON.stringify({ name: 'plain' }),
      });
      expectError(textPlain, 415, 'unsupported_media_type');
      expectInvalid(await call('POST', '/v1/auth/tokens', fresh.token), '/body');
      expect(await tokenRows(fresh.id)).to.have.length(0);
    });
  });
});

describe('API tokens on session-only routes', () => {
  let user: TestUser;
  let apiToken: Created;
  let other: Created;
  before(async () => {
    user = await signUp();
    apiToken = await mint(user.token, { name: 'limited' });
    other = await mint(user.token, { name: 'target' });
  });

  it('refuses POST /v1/auth/tokens with 403 session_required and creates nothing', async () => {
    const before = (await tokenRows(user.id)).map((r) => [r.id, r.name, r.token_hash]);
    expectError(await postToken(apiToken.token, { name: 'escalation' }), 403, 'session_required');
    expect((await tokenRows(user.id)).map((r) => [r.id, r.name, r.token_hash])).to.deep.equal(before);
    expect(await sql('select id from api_tokens where name = ?', ['escalation'])).to.have.length(0);
  });

  it('refuses GET /v1/auth/tokens with 403 session_required', async () => {
    expectError(await listTokens(apiToken.token), 403, 'session_required');
  });

  it('refuses DELETE /v1/auth/tokens/{id} with 403 session_required and deletes nothing', async () => {
    const before = await tokenRows(user.id);
    expectError(await deleteToken(apiToken.token, other.id), 403, 'session_required');
    expectError(await deleteToken(apiToken.token, apiToken.id), 403, 'session_required');
    expect((await tokenRows(user.id)).map((r) => r.id)).to.deep.equal(before.map((r) => r.id));
    expect((await me(other.token)).status).to.equal(200);
  });

  it('asks for a credential first: no credential is 401 unauthenticated on every token route', async () => {
    expectError(await call('GET', '/v1/auth/tokens'), 401, 'unauthenticated');
    expectError(await call('POST', '/v1/auth/tokens', undefined, { name: 'anonymous' }), 401, 'unauthenticated');
    expectError(await call('DELETE', `/v1/auth/tokens/${other.id}`), 401, 'unauthenticated');
    expect(await rowById(other.id)).to.not.equal(undefined);
  });
});

describe('GET /v1/auth/tokens', () => {
  it('lists the caller’s tokens newest first, never with the token itself', async () => {
    const user = await signUp();
    const stranger = await signUp();
    await mint(stranger.token, { name: 'not yours' });
    const first = await mint(user.token, { name: 'first' });
    const second = await mint(user.token, { name: 'second', expires_in_days: 7 });
    const third = await mint(user.token, { name: 'third' });

    const { data, response } = await client(user.token).GET('/v1/auth/tokens');
    expect(response.status).to.equal(200);
    expect(data).to.have.all.keys('success', 'data');
    expect(data!.data).to.have.all.keys('items', 'next_cursor');
    expect(data!.data.next_cursor).to.equal(null);
    const items = data!.data.items;
    expect(items.map((t) => t.name)).to.deep.equal(['third', 'second', 'first']);
    for (const [item, created] of [
      [items[0]!, third],
      [items[1]!, second],
      [items[2]!, first],
    ] as const) {
      expect(item).to.have.all.keys('id', 'name', 'created_at', 'expires_at', 'last_used_at', 'projects', 'scopes');
      expect(item).to.deep.equal({
        id: created.id,
        name: created.name,
        created_at: created.created_at,
        expires_at: created.expires_at,
        last_used_at: null,
        projects: null,
        scopes: ['all'],
      });
    }
    const text = JSON.stringify(data);
    for (const created of [first, second, third]) expect(text).to.not.include(created.token);
  });

  it('shows last_used_at as null until the token is used, then the time of use', async () => {
    const user = await signUp();
    const created = await mint(user.token, { name: 'used' });
    const unused = await mint(user.token, { name: 'unused' });
    const before = await client(user.token).GET('/v1/auth/tokens');
    expect(before.data!.data.items.map((t) => t.last_used_at)).to.deep.equal([null, null]);

    const usedAt = Date.now();
    expect((await me(created.token)).status).to.equal(200);
    const after = await client(user.token).GET('/v1/auth/tokens');
    const [listedUnused, listedUsed] = after.data!.data.items;
    expect(listedUnused!.id).to.equal(unused.id);
    expect(listedUnused!.last_used_at).to.equal(null);
    expect(listedUsed!.id).to.equal(created.id);
    expect(listedUsed!.last_used_at).to.be.a('string').that.matches(ISO_UTC);
    expectCloseTo(listedUsed!.last_used_at!, usedAt, 60_000, 'last_used_at');
    const row = await rowById(created.id);
    expect(new Date(row!.last_used_at!).toISOString()).to.equal(listedUsed!.last_used_at);
  });

  it('pages with limit and next_cursor until next_cursor is null', async () => {
    const user = await signUp();
    const created = [];
    for (const name of ['one', 'two', 'three']) created.push(await mint(user.token, { name }));

    const page1 = await client(user.token).GET('/v1/auth/tokens', { params: { query: { limit: 2 } } });
    expect(page1.response.status).to.equal(200);
    expect(page1.data!.data.items.map((t) => t.name)).to.deep.equal(['three', 'two']);
    const cursor = page1.data!.data.next_cursor;
    expect(cursor).to.be.a('string').and.not.be.empty;

    const page2 = await client(user.token).GET('/v1/auth/tokens', { params: { query: { limit: 2, cursor: cursor! } } });
    expect(page2.response.status).to.equal(200);
    expect(page2.data!.data).to.deep.equal({
      items: [
        {
          id: created[0]!.id,
          name: 'one',
          created_at: created[0]!.created_at,
          expires_at: null,
          last_used_at: null,
          projects: null,
          scopes: ['all'],
        },
      ],
      next_cursor: null,
    });

    // A page that ends exactly at the last token says so.
    const exact = await client(user.token).GET('/v1/auth/tokens', { params: { query: { limit: 3 } } });
    expect(exact.data!.data.items).to.have.length(3);
    expect(exact.data!.data.next_cursor).to.equal(null);
  });

  it('answers an empty list for a user with no tokens', async () => {
    const user = await signUp();
    const answer = await listTokens(user.token);
    expect(answer.status).to.equal(200);
    expect(answer.json).to.deep.equal({ success: true, data: { items: [], next_cursor: null } });
  });

  for (const limit of ['0', '101', 'abc', '-1', '2.5']) {
    it(`refuses limit=${limit} with 400 invalid_request at /query/limit`, async () => {
      const user = await signUp();
      expectInvalid(await listTokens(user.token, `?limit=${limit}`), '/query/limit');
    });
  }

  it('refuses a cursor it did not issue with 400 invalid_request at /query/cursor', async () => {
    const user = await signUp();
    expectInvalid(await listTokens(user.token, '?cursor=garbage'), '/query/cursor');
  });
});

describe('DELETE /v1/auth/tokens/{id}', () => {
  it('answers 204 with no body, and the token is refused at once and gone from the database', async () => {
    const user = await signUp();
    const created = await mint(user.token, { name: 'short-lived' });
    const kept = await mint(user.token, { name: 'kept' });
    expect((await me(created.token)).status).to.equal(200);

    const answer = await deleteToken(user.token, created.id);
    expect(answer.status).to.equal(204);
    expect(answer.text).to.equal('');
    expectError(await me(created.token), 401, 'unauthenticated');
    expect(await rowById(created.id)).to.equal(undefined);
    expect((await tokenRows(user.id)).map((r) => r.id)).to.deep.equal([kept.id]);
    expect((await me(kept.token)).status).to.equal(200);

    // Deleting it again: it no longer exists.
    expectError(await deleteToken(user.token, created.id), 404, 'not_found');
  });

  it('answers 404 not_found for another user’s token, which keeps working', async () => {
    const owner = await signUp();
    const intruder = await signUp();
    const created = await mint(owner.token, { name: 'owned' });
    const answer = await deleteToken(intruder.token, created.id);
    expectError(answer, 404, 'not_found');
    expect(await rowById(created.id)).to.not.equal(undefined);
    const still = await me(created.token);
    expect(still.status).to.equal(200);
    expect(still.json.data.id).to.equal(owner.id);
  });

  it('answers 404 not_found for an unknown id', async () => {
    const user = await signUp();
    const before = await sql<{ n: number }>('select count(*)::int as n from api_tokens');
    expectError(await deleteToken(user.token, '01900000-0000-7000-8000-000000000000'), 404, 'not_found');
    expect(await sql<{ n: number }>('select count(*)::int as n from api_tokens')).to.deep.equal(before);
  });

  it('answers 400 invalid_request for an id that is not a UUID7', async () => {
    const user = await signUp();
    const created = await mint(user.token, { name: 'survivor' });
    expectInvalid(await deleteToken(user.token, 'not-a-uuid'), '/path/id');
    expect(await rowById(created.id)).to.not.equal(undefined);
  });
});

describe('expired API tokens', () => {
  it('refuse an API token past its expires_at with 401 unauthenticated', async () => {
    const user = await signUp();
    const created = await mint(user.token, { name: 'expiring', expires_in_days: 1 });
    expect((await me(created.token)).status).to.equal(200);
    await sql(`update api_tokens set expires_at = now() - interval '1 second' where id = ?`, [created.id]);
    expectError(await me(created.token), 401, 'unauthenticated');
    // The session that made it is unaffected.
    expect((await me(user.token)).status).to.equal(200);
  });
});

describe('API tokens and their user', () => {
  it('keep working after the session that made them logs out', async () => {
    const user = await signUp();
    const created = await mint(user.token, { name: 'outlives the session' });
    const logout = await call('DELETE', '/v1/auth/logout', user.token);
    expect(logout.status).to.equal(204);
    const answer = await me(created.token);
    expect(answer.status).to.equal(200);
    expect(answer.json.data.id).to.equal(user.id);
  });

  it('are distinct: two tokens minted in a row differ in value and hash', async () => {
    const user = await signUp();
    const a = await mint(user.token, { name: 'a' });
    const b = await mint(user.token, { name: 'a' });
    expect(a.token).to.not.equal(b.token);
    expect(a.id).to.not.equal(b.id);
    const rows = await tokenRows(user.id);
    expect(new Set(rows.map((r) => r.token_hash)).size).to.equal(2);
  });
});
