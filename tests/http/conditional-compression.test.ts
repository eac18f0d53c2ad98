/**
 * Conditional reads and compression: every 200 answer to GET or HEAD with a body carries a strong
 * ETag and answers If-None-Match with a 304; bodies of at least 1 KiB go in the coding
 * Accept-Encoding asks for, each coding with its own tag; the live stream is neither tagged nor
 * compressed, and arrives at once. fetch decompresses on its own, so the bytes on the wire are read
 * with node:http (`rawRequest`); the 304s go through fetch, so the contract check judges them.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { baseUrl } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError } from '../support/http.js';
import { rawRequest, type RawAnswer } from '../support/icons.js';
import { createProject, namespaceName, projectPath } from '../support/projects.js';

const STRONG_TAG = /^"[A-Za-z0-9_-]{22}"$/;

function raw(method: string, path: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return rawRequest(baseUrl(), method, path, headers);
}

/** A JSON POST over node:http, for the bytes as sent. */
function rawPost(path: string, headers: Record<string, string>, body: unknown): Promise<RawAnswer> {
  const url = new URL(baseUrl() + path);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: url.pathname,
        headers: { ...headers, 'Content-Type': 'application/json' },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
      },
    );
    request.on('error', reject);
    request.end(JSON.stringify(body));
  });
}

/** The body as the service meant it, whatever coding it went in. */
function decoded(answer: RawAnswer): string {
  const coding = answer.headers['content-encoding'];
  if (coding === 'br') return brotliDecompressSync(answer.body).toString();
  if (coding === 'gzip') return gunzipSync(answer.body).toString();
  expect(coding, 'content-encoding').to.equal(undefined);
  return answer.body.toString();
}

/** A GET through fetch (and so through the contract check) with If-None-Match. */
async function conditionalGet(
  path: string,
  ifNoneMatch: string,
  token?: string,
): Promise<{ status: number; headers: Headers; text: string }> {
  const response = await fetch(baseUrl() + path, {
    headers: { 'If-None-Match': ifNoneMatch, ...(token ? { Authorization: `Bearer ${token}` } : {}) },
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

function expectNotModified(answer: { status: number; headers: Headers; text: string }, tag: string, what: string): void {
  expect(answer.status, what).to.equal(304);
  expect(answer.text, what).to.equal('');
  expect(answer.headers.get('etag'), what).to.equal(tag);
  expect(answer.headers.get('cache-control'), what).to.equal('private, no-cache');
  expect(answer.headers.get('content-type'), what).to.equal(null);
  expect(answer.headers.get('content-encoding'), what).to.equal(null);
}

/** A project whose event list is a few KiB of JSON (30 events). */
async function projectWithEvents(owner: TestUser): Promise<{ namespace: string; key: string; eventsPath: string }> {
  const project = await createProject(owner.token);
  const key = await apiToken(owner.token);
  const events = Array.from({ length: 30 }, (_, i) => ({
    feed: 'general',
    event: `Order #${i} paid`,
    description: `Customer ${i} paid 49.00 EUR for the Pro plan`,
    tags: { plan: 'pro' },
  }));
  expectData(await call('POST', projectPath(project.namespace, '/events'), key, { events }), 201);
  return { namespace: project.namespace, key, eventsPath: projectPath(project.namespace, '/events') };
}

describe('conditional reads and compression', () => {
  let owner: TestUser;
  let namespace: string;
  let eventsPath: string;
  let key: string;
  before(async () => {
    owner = await signUp();
    ({ namespace, eventsPath, key } = await projectWithEvents(owner));
  });

  describe('ETag and If-None-Match', () => {
    it('gives every 200 GET with a body a strong ETag, the same for the same bytes, and Cache-Control private, no-cache on the API', async () => {
      const paths = ['/v1', '/v1/users/me', '/v1/projects', projectPath(namespace), projectPath(namespace, '/feeds'), eventsPath];
      for (const path of [...paths, '/v1/openapi.json']) {
        const first = await call('GET', path, owner.token);
        const second = await call('GET', path, owner.token);
        expect(first.status, path).to.equal(200);
        const tag = first.headers.get('etag');
        expect(tag, path).to.match(/^"[A-Za-z0-9_-]{22}(-br|-gzip)?"$/);
        expect(second.headers.get('etag'), path).to.equal(tag);
        expect(first.headers.get('cache-control'), path).to.equal('private, no-cache');
      }
      for (const path of [...paths, '/v1/openapi.json', '/', '/docs', '/docs/init.js', '/docs/redoc.standalone.js']) {
        const plain = await raw('GET', path, { Authorization: `Bearer ${owner.token}` });
        expect(plain.status, path).to.equal(200);
        expect(plain.headers.etag, path).to.match(STRONG_TAG);
        expect(plain.headers['content-encoding'], path).to.equal(undefined);
        expect(plain.headers['content-length'], path).to.equal(String(plain.body.length));
      }
    });

    it('answers 304 with no body to If-None-Match naming the tag: exactly, in a list, weakened with W/, or *', async () => {
      for (const path of ['/v1', projectPath(namespace), eventsPath, '/v1/openapi.json']) {
        const tag = (await call('GET', path, owner.token)).headers.get('etag')!;
        for (const field of [tag, `"other", ${tag}`, `W/${tag}`, `W/"x",W/${tag}`, '*']) {
          expectNotModified(await conditionalGet(path, field, owner.token), tag, `${path} If-None-Match: ${field}`);
        }
        for (const field of ['"other"', `${tag.slice(0, -2)}"`, `"other", W/${tag.slice(0, -2)}"`]) {
          const full = await conditionalGet(path, field, owner.token);
          expect(full.status, `${path} If-None-Match: ${field}`).to.equal(200);
          expect(full.headers.get('etag')).to.equal(tag);
          expect(full.text).to.not.equal('');
        }
      }
    });

    it('refuses a malformed If-None-Match on the API (400, as any header the contract declares) and ignores it elsewhere', async () => {
      for (const field of ['garbage', '"unterminated', '"a""b"', '*, "a"']) {
        const answer = await call('GET', projectPath(namespace), owner.token, undefined, { 'If-None-Match': field });
        expectError(answer, 400, 'invalid_request', field);
        expect(
          answer.json.error.details.map((d: { path: string }) => d.path),
          field,
        ).to.include('/headers/if-none-match');
        const page = await raw('GET', '/docs', { 'If-None-Match': field });
        expect(page.status, field).to.equal(200);
      }
    });

    it('answers HEAD as GET: the same ETag, coding and length without the body, and 304 to a matching tag', async () => {
      const headers = { Authorization: `Bearer ${owner.token}`, 'Accept-Encoding': 'br' };
      const got = await raw('GET', eventsPath, headers);
      const head = await raw('HEAD', eventsPath, headers);
      expect([head.status, head.body.length]).to.deep.equal([200, 0]);
      for (const name of ['etag', 'content-encoding', 'content-length', 'vary', 'cache-control', 'content-type'])
        expect(head.headers[name], name).to.equal(got.headers[name]);
      const revalidated = await raw('HEAD', eventsPath, { ...headers, 'If-None-Match': got.headers.etag! });
      expect([revalidated.status, revalidated.headers.etag]).to.deep.equal([304, got.headers.etag]);
    });

    it('gives a changed resource a new tag: the old one gets the whole new answer', async () => {
      const project = await createProject(owner.token);
      const path = projectPath(project.namespace);
      const before = (await call('GET', path, owner.token)).headers.get('etag')!;
      expectData(await call('PATCH', path, owner.token, { name: 'Renamed' }));
      const after = await conditionalGet(path, before, owner.token);
      expect(after.status).to.equal(200);
      expect(JSON.parse(after.text).data.name).to.equal('Renamed');
      expect(after.headers.get('etag')).to.match(STRONG_TAG).and.not.equal(before);
      expectNotModified(await conditionalGet(path, after.headers.get('etag')!, owner.token), after.headers.get('etag')!, 'the new tag');
    });

    it('puts no ETag on errors or writes, and never answers an error 304', async () => {
      const missing = await conditionalGet(projectPath('no-such-project-here'), '*', owner.token);
      expectError({ ...missing, json: JSON.parse(missing.text) }, 404, 'not_found');
      expect(missing.headers.get('etag')).to.equal(null);
      const anonymous = await conditionalGet(projectPath(namespace), '*');
      expect([anonymous.status, anonymous.headers.get('etag')]).to.deep.equal([401, null]);

      const created = await call('POST', '/v1/projects', owner.token, { name: 'Written', namespace: namespaceName() });
      expectData(created, 201);
      expect(created.headers.get('etag')).to.equal(null);
      const renamed = await call('PATCH', projectPath(namespace), owner.token, { name: 'Still mine' });
      expect(expectData(renamed).name).to.equal('Still mine');
      expect(renamed.headers.get('etag')).to.equal(null);
    });

    it('tags the reference page and its assets, with their own Cache-Control', async () => {
      const expected: Record<string, string> = {
        '/': 'no-cache',
        '/docs': 'no-cache',
        '/docs/init.js': 'no-cache',
        '/docs/redoc.standalone.js': 'public, max-age=86400',
      };
      for (const [path, cacheControl] of Object.entries(expected)) {
        const full = await raw('GET', path);
        expect([full.status, full.headers['cache-control']], path).to.deep.equal([200, cacheControl]);
        const again = await raw('GET', path, { 'If-None-Match': full.headers.etag! });
        expect([again.status, again.body.length, again.headers.etag, again.headers['cache-control']], path).to.deep.equal([
          304,
          0,
          full.headers.etag,
          cacheControl,
        ]);
      }
    });
  });

  describe('compression', () => {
    it('sends a body of 1 KiB or more in br or gzip, each decoding to the same JSON, with its own tag and Vary: Accept-Encoding', async () => {
      const auth = { Authorization: `Bearer ${owner.token}` };
      const identity = await raw('GET', eventsPath, auth);
      const text = decoded(identity);
      expect(Buffer.byteLength(text)).to.be.above(1024);
      expect(JSON.parse(text).data.items).to.have.length(30);
      const tags = new Set([identity.headers.etag]);
      for (const coding of ['br', 'gzip']) {
        const answer = await raw('GET', eventsPath, { ...auth, 'Accept-Encoding': coding });
        expect(answer.status).to.equal(200);
        expect(answer.headers['content-encoding']).to.equal(coding);
        expect(answer.headers.vary).to.match(/Accept-Encoding/);
        expect(answer.headers['content-length']).to.equal(String(answer.body.length));
        expect(answer.body.length).to.be.below(identity.body.length / 2);
        expect(decoded(answer)).to.equal(text);
        expect(answer.headers.etag).to.equal(`${identity.headers.etag!.slice(0, -1)}-${coding}"`);
        tags.add(answer.headers.etag);
      }
      expect(tags.size).to.equal(3);
      expect(identity.headers.vary).to.match(/Accept-Encoding/);
    });

    it('compares If-None-Match with the tag of the coding this request gets', async () => {
      const auth = { Authorization: `Bearer ${owner.token}` };
      const gzip = await raw('GET', eventsPath, { ...auth, 'Accept-Encoding': 'gzip' });
      const hit = await raw('GET', eventsPath, { ...auth, 'Accept-Encoding': 'gzip', 'If-None-Match': gzip.headers.etag! });
      expect([hit.status, hit.body.length, hit.headers.etag, hit.headers.vary]).to.deep.equal([
        304,
        0,
        gzip.headers.etag,
        'Accept-Encoding',
      ]);
      // The client holds the gzip bytes; br is another representation, sent whole.
      const other = await raw('GET', eventsPath, { ...auth, 'Accept-Encoding': 'br', 'If-None-Match': gzip.headers.etag! });
      expect([other.status, other.headers['content-encoding']]).to.deep.equal([200, 'br']);
    });

    it('weighs Accept-Encoding by q: q=0 refuses, the highest q wins, br on a tie, identity when nothing offered is acceptable', async () => {
      const cases: [string, string | undefined][] = [
        ['gzip, br', 'br'],
        ['gzip, deflate', 'gzip'],
        ['br;q=0, gzip', 'gzip'],
        ['gzip;q=0.5, br;q=0.4', 'gzip'],
        ['GZIP;Q=1, BR;Q=0.9', 'gzip'],
        ['x-gzip', 'gzip'],
        ['*', 'br'],
        ['*;q=0.1, br;q=0', 'gzip'],
        ['br;q=0.5, identity', undefined],
        ['gzip;q=0, br;q=0', undefined],
        ['identity;q=0', undefined],
        ['*;q=0', undefined],
        ['deflate, compress', undefined],
        ['br;q=2, gzip;q=abc', undefined],
        ['', undefined],
        [';;,,', undefined],
      ];
      for (const [acceptEncoding, coding] of cases) {
        const answer = await raw('GET', eventsPath, { Authorization: `Bearer ${owner.token}`, 'Accept-Encoding': acceptEncoding });
        expect(answer.status, acceptEncoding).to.equal(200);
        expect(answer.headers['content-encoding'], acceptEncoding).to.equal(coding);
        expect(JSON.parse(decoded(answer)).data.items, acceptEncoding).to.have.length(30);
      }
    });

    it('sends an answer under 1 KiB as it is, without Vary', async () => {
      for (const path of ['/v1', '/v1/users/me', projectPath(namespace)]) {
        const answer = await raw('GET', path, { Authorization: `Bearer ${owner.token}`, 'Accept-Encoding': 'gzip, br' });
        expect(answer.status, path).to.equal(200);
        expect(answer.body.length, path).to.be.below(1024);
        expect([answer.headers['content-encoding'], answer.headers.vary], path).to.deep.equal([undefined, undefined]);
      }
    });

    it('compresses any large answer, a write or an error too, without tagging it', async () => {
      const publish = (events: unknown[]) =>
        rawPost(projectPath(namespace, '/events'), { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'gzip' }, { events });
      const created = await publish(
        Array.from({ length: 20 }, (_, i) => ({ feed: 'general', event: `Batch ${i}`, description: 'x'.repeat(100) })),
      );
      expect([created.status, created.headers['content-encoding'], created.headers.etag]).to.deep.equal([201, 'gzip', undefined]);
      expect(JSON.parse(decoded(created)).data.items).to.have.length(20);

      const refused = await publish(Array.from({ length: 20 }, () => ({ feed: 'general', event: '' })));
      expect([refused.status, refused.headers['content-encoding'], refused.headers.etag]).to.deep.equal([400, 'gzip', undefined]);
      const error = JSON.parse(decoded(refused)).error;
      expect([error.code, error.details.length]).to.deep.equal(['invalid_request', 20]);
    });

    it('serves the contract compressed, tagged once per process', async () => {
      const identity = await raw('GET', '/v1/openapi.json');
      for (const coding of ['br', 'gzip']) {
        const answer = await raw('GET', '/v1/openapi.json', { 'Accept-Encoding': coding });
        expect(answer.headers['content-encoding']).to.equal(coding);
        expect(answer.body.length).to.be.below(identity.body.length * 0.15);
        expect(decoded(answer)).to.equal(identity.body.toString());
      }
      expect(JSON.parse(identity.body.toString()).openapi).to.equal('3.0.0');
    });

    it('serves the reference script compressed to well under half its size, with the same bytes decoded', async () => {
      const file = path.join(path.dirname(createRequire(import.meta.url).resolve('redoc/package.json')), 'bundles/redoc.standalone.js');
      const original = readFileSync(file);
      const identity = await raw('GET', '/docs/redoc.standalone.js');
      expect(identity.body.equals(original)).to.equal(true);
      for (const coding of ['br', 'gzip']) {
        const answer = await raw('GET', '/docs/redoc.standalone.js', { 'Accept-Encoding': `${coding}` });
        expect([answer.status, answer.headers['content-encoding'], answer.headers['cache-control']]).to.deep.equal([
          200,
          coding,
          'public, max-age=86400',
        ]);
        expect(answer.body.length).to.be.below(original.length * 0.4);
        expect(Buffer.from(decoded(answer)).equals(original)).to.equal(true);
        expect(answer.headers['content-length']).to.equal(String(answer.body.length));
      }
    });

    it('delivers the live stream at once, never compressed or tagged, whatever Accept-Encoding says', async () => {
      const url = new URL(baseUrl() + projectPath(namespace, '/events/stream'));
      let received = '';
      let response: http.IncomingMessage | undefined;
      const request = http.request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream', 'Accept-Encoding': 'gzip, br', 'If-None-Match': '*' },
      });
      try {
        response = await new Promise<http.IncomingMessage>((resolve, reject) => {
          request.on('response', resolve);
          request.on('error', reject);
          request.end();
        });
        response.setEncoding('utf8');
        response.on('data', (part: string) => (received += part));
        expect(response.statusCode).to.equal(200);
        expect(response.headers['content-type']).to.match(/^text\/event-stream/);
        expect([response.headers['content-encoding'], response.headers.etag, response.headers.vary]).to.deep.equal([
          undefined,
          undefined,
          undefined,
        ]);
        const published = expectData(await call('POST', projectPath(namespace, '/feeds/general/events'), key, { event: 'Right now' }), 201);
        const sent = performance.now();
        while (!received.includes(`id: ${published.id}\n`)) {
          expect(performance.now() - sent, `the event on the stream; got ${JSON.stringify(received)}`).to.be.below(2_000);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      } finally {
        request.destroy();
      }
    });
  });
});
