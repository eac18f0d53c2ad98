/**
 * What the /cdn middleware answers, on a throwaway Koa app behind the real envelope (bytes, HEAD,
 * conditional requests, refusals, a store that cannot be read), and an icon stored and served through
 * the running service (on the embedded database by default).
 */
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { Unavailable } from '../../server/src/errors.js';
import { cdn } from '../../server/src/http/cdn.js';
import { envelope } from '../../server/src/http/envelope.js';
import { representations } from '../../server/src/http/representation.js';
import { IconStore } from '../../server/src/storage/icons.js';
import { sha256, sql } from '../support/harness.js';
import { iconRow, rawRequest } from '../support/icons.js';
import { signUp } from '../support/accounts.js';
import { call, expectData } from '../support/http.js';
import { iconUrl, namespaceName } from '../support/projects.js';
import { chunk, chunkTypes, decodePng, encodePng, png } from '../support/png.js';
import { DATA_URL, databaseRows, HTML } from './icons-support.js';

/**
 * A throwaway Koa app: as the service's, validators (whose 304s the CDN's ETag gets) and the envelope,
 * then the CDN middleware on `store`, and a last middleware that answers 'passed on'.
 */
async function cdnApp(store: Pick<IconStore, 'read'>): Promise<{ server: http.Server; port: number }> {
  const app = new Koa();
  app.silent = true;
  app.use(representations());
  app.use(envelope());
  app.use(cdn(store, { consumeCdn: () => undefined }));
  app.use((ctx) => {
    ctx.body = 'passed on';
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('icon CDN middleware', () => {
  const bytes = png(20, 10, { color: [200, 10, 10] });
  const key = sha256(bytes);
  let server: http.Server;
  let port: number;

  const request = (method: string, rawPath: string, headers: Record<string, string> = {}) => rawRequest(port, method, rawPath, headers);

  before(async () => {
    const store = new IconStore(databaseRows(), () => 'unused');
    await store.saveAlone({ bytes, sha256: key });
    ({ server, port } = await cdnApp(store));
  });

  after(() => new Promise((resolve) => server.close(resolve)));

  it('serves the exact bytes as an immutable PNG with its hash as ETag', async () => {
    const answer = await request('GET', `/cdn/icons/${key}.png`);
    expect(answer.status).to.equal(200);
    expect(answer.body.equals(bytes)).to.equal(true);
    expect(answer.headers['content-type']).to.equal('image/png');
    expect(answer.headers['content-length']).to.equal(String(bytes.length));
    expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    expect(answer.headers.etag).to.equal(`"${key}"`);
    expect(answer.headers['x-content-type-options']).to.equal('nosniff');
  });

  it('answers HEAD with the same headers and no body', async () => {
    const answer = await request('HEAD', `/cdn/icons/${key}.png`);
    expect(answer.status).to.equal(200);
    expect(answer.body.length).to.equal(0);
    expect(answer.headers['content-type']).to.equal('image/png');
    expect(answer.headers['content-length']).to.equal(String(bytes.length));
    expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    expect(answer.headers.etag).to.equal(`"${key}"`);
  });

  it('answers 304 to a matching If-None-Match and 200 to another', async () => {
    for (const method of ['GET', 'HEAD']) {
      for (const tag of [`"${key}"`, `W/"${key}"`, `"other", "${key}"`, '*']) {
        const answer = await request(method, `/cdn/icons/${key}.png`, { 'If-None-Match': tag });
        expect(answer.status, `${method} ${tag}`).to.equal(304);
        expect(answer.body.length).to.equal(0);
        expect(answer.headers.etag).to.equal(`"${key}"`);
        expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
      }
    }
    const stale = await request('GET', `/cdn/icons/${key}.png`, { 'If-None-Match': '"other"' });
    expect(stale.status).to.equal(200);
    expect(stale.body.equals(bytes)).to.equal(true);
  });

  it('answers 404 in the envelope for a missing icon (even to If-None-Match: *), a bad name or a traversal attempt', async () => {
    const missing = sha256(Buffer.from('never stored'));
    expect((await request('GET', `/cdn/icons/${missing}.png`, { 'If-None-Match': '*' })).status).to.equal(404);
    for (const rawPath of [
      `/cdn/icons/${missing}.png`,
      `/cdn/icons/${key.toUpperCase()}.png`,
      `/cdn/icons/${key}.PNG`,
      `/cdn/icons/${key}.gif`,
      `/cdn/icons/${key}`,
      `/cdn/icons/${key}.png/`,
      `/cdn/icons/x/${key}.png`,
      `/cdn/${key}.png`,
      '/cdn/icons/../x',
      '/cdn/icons/../../package.json',
      '/cdn/icons/%2e%2e/%2e%2e/package.json',
      '/cdn/icons/..%2f..%2fpackage.json',
      `/cdn/icons/%2e%2e%2f${key}.png`,
      '/cdn/',
    ]) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await request(method, rawPath);
        expect(answer.status, `${method} ${rawPath}`).to.equal(404);
        if (method === 'GET') {
          expect(JSON.parse(answer.body.toString())).to.deep.equal({ success: false, error: { code: 'not_found', message: 'Not found.' } });
        }
      }
    }
  });

  it('answers 405 with Allow for any other method under /cdn/', async () => {
    for (const [method, rawPath] of [
      ['POST', `/cdn/icons/${key}.png`],
      ['DELETE', `/cdn/icons/${key}.png`],
      ['PUT', '/cdn/other'],
    ]) {
      const answer = await request(method!, rawPath!);
      expect(answer.status, `${method} ${rawPath}`).to.equal(405);
      expect(answer.headers.allow).to.equal('GET, HEAD');
      const json = JSON.parse(answer.body.toString());
      expect(json.success).to.equal(false);
      expect(json.error.code).to.equal('method_not_allowed');
    }
  });

  it('passes on every path outside /cdn/', async () => {
    for (const rawPath of ['/cdn', '/cdnx/icons', `/v1/icons/${key}.png`]) {
      const answer = await request('GET', rawPath);
      expect(answer.status, rawPath).to.equal(200);
      expect(answer.body.toString()).to.equal('passed on');
    }
  });

  it('answers 503 in the envelope, with Retry-After, when the store cannot be read', async () => {
    const unreadable = await cdnApp({
      read: async () => {
        throw new Unavailable('The icon could not be read right now; retry later.', 5);
      },
    });
    try {
      for (const method of ['GET', 'HEAD']) {
        const answer = await rawRequest(unreadable.port, method, `/cdn/icons/${key}.png`, { 'If-None-Match': `"${key}"` });
        expect(answer.status, method).to.equal(503);
        expect(answer.headers['retry-after']).to.equal('5');
        expect(answer.headers['cache-control']).to.equal(undefined);
        if (method === 'GET') {
          expect(JSON.parse(answer.body.toString())).to.deep.equal({
            success: false,
            error: { code: 'unavailable', message: 'The icon could not be read right now; retry later.' },
          });
        }
      }
    } finally {
      await new Promise((resolve) => unreadable.server.close(resolve));
    }
  });
});

describe('icons through the service', () => {
  it('stores and serves a re-encoded icon: the same pixels, keyed by its own SHA-256, without the HTML it carried', async () => {
    const user = await signUp();
    const sample = (x: number, y: number, c: number) => (c === 3 ? 200 : x * 12 + y * c);
    const original = encodePng({ width: 20, height: 10, bitDepth: 8, colourType: 6, sample });
    const sent = Buffer.concat([original.subarray(0, 33), chunk('htMl', HTML), original.subarray(33)]);
    const body = { name: 'Iconic', namespace: namespaceName(), icon: DATA_URL + sent.toString('base64') };
    const project = expectData(await call('POST', '/v1/projects', user.token, body), 201);
    const key = /\/cdn\/icons\/([0-9a-f]{64})\.png$/.exec(project.icon)?.[1];
    expect(project.icon).to.equal(iconUrl(key!));
    expect(await sql('select icon from projects where id = ?', [project.id])).to.deep.equal([{ icon: key }]);

    const answer = await fetch(project.icon);
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('content-type')).to.equal('image/png');
    expect(answer.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable');
    expect(answer.headers.get('etag')).to.equal(`"${key}"`);
    const served = Buffer.from(await answer.arrayBuffer());
    expect(sha256(served)).to.equal(key);
    expect(served.includes('<html')).to.equal(false);
    expect(chunkTypes(served)).to.deep.equal(['IHDR', 'IDAT', 'IEND']);
    expect(decodePng(served).rgba.equals(decodePng(original).rgba)).to.equal(true);
    // The database is the store: the row holds exactly what is served.
    expect(await iconRow(key!)).to.deep.equal({ size: served.length, bytes: served, fresh: true });
    // fetch sends a conditional request with `Cache-Control: no-cache`, which asks caches, not the service, to revalidate.
    const revalidated = await fetch(project.icon, { headers: { 'If-None-Match': `"${key}"` } });
    expect([revalidated.status, (await revalidated.arrayBuffer()).byteLength, revalidated.headers.get('etag')]).to.deep.equal([
      304,
      0,
      `"${key}"`,
    ]);
  });
});
