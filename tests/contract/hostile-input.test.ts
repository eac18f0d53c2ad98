/**
 * Input the contract's field rules let through but the service cannot store or afford must be 400
 * `invalid_request` in the envelope, with at most 20 `details`, and change nothing, on every route
 * and in every part of a request (body, query, path). The classes guarded here, each on real routes:
 * - characters no store holds: NUL, and UTF-16 surrogates without their pair;
 * - numbers JSON can spell but JavaScript cannot hold (`1e309` parses to Infinity);
 * - timestamps no store holds: leap second 60, year 0000, a day the month lacks, an offset past 9999;
 * - input whose faults are many: tens of thousands of bad values or unknown fields are answered
 *   with a bounded list, and validation stops early instead of collecting them all;
 * - nesting past what any body of the contract needs.
 * The database is compared whole before and after each case (the fuzzer's snapshot).
 */
import { expect } from 'chai';
import { baseUrl, database } from '../support/harness.js';
import { inviteCode, signUp, uniqueName, type TestUser } from '../support/accounts.js';
import { expectData, expectError, send, type Answer } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { Snapshotter } from '../support/fuzz/snapshot.js';

const MAX_DETAILS = 20;
const NUL = 'must not contain NUL characters';
const SURROGATE = 'must not contain unpaired surrogates';
const TOO_LARGE = 'is a number too large to hold';

/** A raw JSON text body (so that `1e309` and lone surrogates reach the server as written). */
function raw(method: string, path: string, token: string | undefined, body?: string): Promise<Answer> {
  return send(baseUrl(), {
    method,
    path,
    ...(token ? { token } : {}),
    ...(body === undefined ? {} : { raw: { body, contentType: 'application/json' } }),
  });
}

/** A 400 whose details are exactly `details`. */
function expectRefused(answer: Answer, details: { path: string; message: string }[]): void {
  expectError(answer, 400, 'invalid_request');
  expect(answer.json.error.details, answer.text.slice(0, 500)).to.deep.equal(details);
}

/** A 400 with between 1 and MAX_DETAILS details, the first at `path`, in a small answer. */
function expectBoundedRefusal(answer: Answer, path: string): void {
  expectError(answer, 400, 'invalid_request');
  const details = answer.json.error.details as { path: string }[];
  expect(details.length, answer.text.slice(0, 500)).to.be.within(1, MAX_DETAILS);
  expect(details[0]!.path).to.equal(path);
  expect(answer.text.length, 'answer size').to.be.below(8 * 1024);
}

/** `count` fields `"<base-36 index>":<value>`, as JSON text. */
const manyFields = (count: number, value: string, prefix = '') =>
  Array.from({ length: count }, (_, i) => `"${prefix}${i.toString(36)}":${value}`).join(',');

describe('hostile input: refused with 400 before it reaches the database or costs the validator', function () {
  this.timeout(60_000);
  let owner: TestUser;
  let namespace: string;
  let snapshot: Snapshotter;
  let baseline: Map<string, string>;
  /** As the project's owner. */
  const asOwner = (method: string, path: string, body?: string) => raw(method, path, owner.token, body);
  const publish = (body: string) => asOwner('POST', projectPath(namespace, '/feeds/main/events'), body);

  before(async () => {
    owner = await signUp();
    const wanted = uniqueName('hostile').replace(/_/g, '-').toLowerCase();
    namespace = (await createProject(owner.token, { name: 'Hostile', namespace: wanted })).namespace;
    expectData(await asOwner('POST', projectPath(namespace, '/feeds'), JSON.stringify({ name: 'main' })), 201);
    snapshot = new Snapshotter(database());
  });

  beforeEach(async () => {
    baseline = await snapshot.take();
  });

  afterEach(async () => {
    expect(Snapshotter.diff(baseline, await snapshot.take()), 'tables changed').to.deep.equal([]);
  });

  describe('characters no store holds', () => {
    it('login: NUL in the login name', async () => {
      const body = JSON.stringify({ login: `${owner.username}\u0000`, password: owner.password });
      expectRefused(await raw('POST', '/v1/auth/login', undefined, body), [{ path: '/body/login', message: NUL }]);
    });

    it('sign-up: a lone surrogate in the password, NUL in the username; the invite is not used', async () => {
      const invite = await inviteCode();
      baseline = await snapshot.take();
      const body = `{"username":"ab\\u0000c","email":"x@example.com","password":"\\ud800abcdefgh","invite":${JSON.stringify(invite)}}`;
      expectRefused(await raw('POST', '/v1/auth/signup', undefined, body), [
        { path: '/body/username', message: NUL },
        { path: '/body/password', message: SURROGATE },
      ]);
    });

    it('project create and update: NUL and lone surrogates in the name', async () => {
      expectRefused(await asOwner('POST', '/v1/projects', JSON.stringify({ name: 'a\u0000b', namespace: 'nul-project' })), [
        { path: '/body/name', message: NUL },
      ]);
      expectRefused(await asOwner('POST', '/v1/projects', '{"name":"x\\udfff","namespace":"surrogate-project"}'), [
        { path: '/body/name', message: SURROGATE },
      ]);
      expectRefused(await asOwner('PATCH', projectPath(namespace), '{"name":"\\ud83d"}'), [{ path: '/body/name', message: SURROGATE }]);
      expectRefused(await asOwner('PATCH', projectPath(namespace), '{"name":"\\u0000"}'), [{ path: '/body/name', message: NUL }]);
    });

    it('a field name with NUL, even one the contract leaves open (event tags)', async () => {
      expectRefused(await publish(JSON.stringify({ event: 'x', tags: { 'a\u0000': 1 } })), [
        { path: '/body/tags/a\u0000', message: 'is a field name with a NUL character or an unpaired surrogate' },
      ]);
    });

    it('in the query and the path alike', async () => {
      expectRefused(await asOwner('GET', `${projectPath(namespace, '/events')}?tag=a%00b`), [{ path: '/query/tag', message: NUL }]);
      expectRefused(await asOwner('PATCH', projectPath(namespace, '/feeds/ma%00in'), JSON.stringify({ name: 'other' })), [
        { path: '/path/feed', message: NUL },
      ]);
    });
  });

  describe('numbers JSON can spell but JavaScript cannot hold', () => {
    it('insight create and update, event tags: 1e309 and its kin are refused, not stored as null', async () => {
      const insights = projectPath(namespace, '/insights');
      expectRefused(await asOwner('POST', insights, '{"title":"huge","value":1e309}'), [{ path: '/body/value', message: TOO_LARGE }]);
      const insight = expectData(await asOwner('POST', insights, '{"title":"small","value":1}'), 201);
      baseline = await snapshot.take();
      expectRefused(await asOwner('PATCH', `${insights}/${insight.id}`, '{"increment":-1e309}'), [
        { path: '/body/increment', message: TOO_LARGE },
      ]);
      expectRefused(await publish('{"event":"x","tags":{"n":1e400}}'), [{ path: '/body/tags/n', message: TOO_LARGE }]);
    });
  });

  describe('timestamps no store holds', () => {
    const impossible = ['2026-12-31T23:59:60Z', '0000-01-01T00:00:00Z', '0000-12-31T23:00:00-02:00', '2026-02-30T00:00:00Z'];
    for (const timestamp of [...impossible, '9999-12-31T23:59:59-23:59']) {
      it(`event publish: ${timestamp}`, async () => {
        expectRefused(await publish(JSON.stringify({ event: 'x', timestamp })), [
          { path: '/body/timestamp', message: 'must match format "date-time"' },
        ]);
      });
    }

    it('the first and last instants that can be stored are accepted', async () => {
      const edges = [
        ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
        ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
      ];
      for (const [timestamp, stored] of edges) {
        expect(expectData(await publish(JSON.stringify({ event: 'edge', timestamp })), 201).timestamp).to.equal(stored);
      }
      baseline = await snapshot.take();
    });
  });

  describe('input whose faults are many', () => {
    it('event publish with 60,000 bad tag values: a short list, no 500', async () => {
      expectBoundedRefusal(await publish(`{"event":"x","tags":{${manyFields(60_000, 'null', 't')}}}`), '/body/tags/t0');
    });

    it('60,000 values that each break the screen: at most 20 listed', async () => {
      const answer = await publish(`{"event":"x","tags":{${manyFields(60_000, '"\\u0000"')}}}`);
      expectBoundedRefusal(answer, '/body/tags/0');
      expect(answer.json.error.details).to.have.length(MAX_DETAILS);
    });

    it('project create with 70,000 unknown fields: a short answer, not megabytes', async () => {
      const body = `{"name":"n","namespace":"many-fields",${manyFields(70_000, '1', 'f')}}`;
      expectBoundedRefusal(await asOwner('POST', '/v1/projects', body), '/body/f0');
    });

    it('a small request still gets every problem listed', async () => {
      expectRefused(await asOwner('POST', '/v1/projects', '{"name":"","namespace":"A","extra":1}'), [
        { path: '/body/extra', message: 'is not a field of this request' },
        { path: '/body/name', message: 'must NOT have fewer than 1 characters' },
        { path: '/body/name', message: 'must match pattern "\\S"' },
        { path: '/body/namespace', message: 'must NOT have fewer than 3 characters' },
        { path: '/body/namespace', message: 'must match pattern "^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$"' },
      ]);
    });
  });

  describe('nesting past what any body needs', () => {
    it('a value nested 100,000 deep: 400 at the first level past the limit', async () => {
      const nested = '['.repeat(100_000) + ']'.repeat(100_000);
      expectRefused(await asOwner('POST', '/v1/projects', `{"name":${nested},"namespace":"deep"}`), [
        { path: `/body/name${'/0'.repeat(32)}`, message: 'nests deeper than 32 levels' },
      ]);
    });
  });
});
