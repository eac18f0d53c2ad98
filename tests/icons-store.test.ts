/**
 * The icon store and the /cdn middleware on their own: every refusal API.md §2 lists (and that it
 * leaves the folder untouched), content-addressed saving, and what the CDN answers, on a throwaway
 * Koa app behind the real envelope.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Koa from 'koa';
import { InvalidRequest } from '../server/src/errors.js';
import { cdn } from '../server/src/http/cdn.js';
import { envelope } from '../server/src/http/envelope.js';
import { IconStore } from '../server/src/storage/icons.js';
import { chunk, notPng, png, PNG_SIGNATURE, pngOfSize } from './support/png.js';

const FIELD = '/body/icon';
const DATA_URL = 'data:image/png;base64,';

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

describe('icon store', () => {
  let root: string;
  let dir: string;
  let base: string;
  let store: IconStore;

  beforeEach(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-icons-'));
    dir = path.join(root, 'icons'); // not created: save() must make it
    base = 'http://cdn.test/cdn';
    store = new IconStore(dir, () => base);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  describe('parse', () => {
    /** Parses expecting a refusal: a 400 pointing at the field, with nothing written. */
    function refusal(value: string, form: 'create' | 'update' = 'create'): InvalidRequest {
      let thrown: unknown;
      try {
        store.parse(value, form, FIELD);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).to.be.instanceOf(InvalidRequest);
      const error = thrown as InvalidRequest;
      expect(error.status).to.equal(400);
      expect(error.code).to.equal('invalid_request');
      expect(error.details).to.have.length(1);
      expect(error.details![0]!.path).to.equal(FIELD);
      expect(error.message).to.match(/^icon /);
      expect(existsSync(dir)).to.equal(false);
      return error;
    }

    it('accepts bare Base64 and a data URL on create, and hashes the decoded bytes', () => {
      const bytes = png(32, 32);
      for (const value of [bytes.toString('base64'), DATA_URL + bytes.toString('base64')]) {
        const icon = store.parse(value, 'create', FIELD);
        expect(icon.bytes.equals(bytes)).to.equal(true);
        expect(icon.sha256).to.equal(sha256(bytes));
      }
      expect(existsSync(dir)).to.equal(false);
    });

    it('accepts a data URL on update and refuses bare Base64 or another media type', () => {
      const b64 = png(8, 8).toString('base64');
      expect(store.parse(DATA_URL + b64, 'update', FIELD).sha256).to.equal(sha256(png(8, 8)));
      expect(refusal(b64, 'update').message).to.contain('data:image/png;base64,');
      expect(refusal(`data:image/jpeg;base64,${b64}`, 'update').message).to.contain('data:image/png;base64,');
    });

    it('refuses Base64 that is not strict: bad padding, whitespace, URL-safe or foreign characters', () => {
      const b64 = png(8, 8).toString('base64');
      for (const value of [
        b64.replace(/=+$/, ''), // padding dropped
        `${b64.slice(0, 20)}\n${b64.slice(20)}`,
        ` ${b64}`,
        `${b64.replace(/=+$/, '')}===`,
        b64.replace(/\+/g, '-').replace(/\//g, '_') + '-_', // URL-safe alphabet
        `${b64.slice(0, 20)}*${b64.slice(21)}`,
        'AB==', // bits left over after the last byte must be zero
      ]) {
        expect(refusal(value).message, JSON.stringify(value.slice(0, 30))).to.equal('icon is not valid Base64');
      }
      expect(refusal(`${DATA_URL}${b64} `).message).to.equal('icon is not valid Base64');
    });

    it('accepts exactly 256 KiB decoded and refuses one byte more', () => {
      const limit = pngOfSize(262_144);
      expect(limit.length).to.equal(262_144);
      expect(store.parse(limit.toString('base64'), 'create', FIELD).bytes.length).to.equal(262_144);
      const over = pngOfSize(262_145);
      expect(refusal(over.toString('base64')).message).to.contain('256 KiB');
    });

    it('refuses what is not a PNG', () => {
      for (const bytes of [notPng, Buffer.alloc(0), PNG_SIGNATURE.subarray(0, 7), Buffer.from('not an image at all')]) {
        expect(refusal(bytes.toString('base64')).message).to.equal('icon is not a PNG image');
      }
    });

    it('refuses a PNG whose header is missing, misplaced, mis-sized or corrupt', () => {
      const good = png(4, 4);
      const badCrc = Buffer.from(good);
      badCrc[17] = 0xff; // width's second byte: the IHDR CRC no longer holds
      const header = good.subarray(16, 29);
      for (const bytes of [
        PNG_SIGNATURE,
        good.subarray(0, 30), // cut inside IHDR
        badCrc,
        Buffer.concat([PNG_SIGNATURE, chunk('tEXt', Buffer.from('a\0b')), good.subarray(8)]), // IHDR not first
        Buffer.concat([PNG_SIGNATURE, chunk('IHDR', header.subarray(0, 12)), good.subarray(33)]), // 12-byte IHDR
        Buffer.concat([PNG_SIGNATURE, chunk('IHDx', header), good.subarray(33)]),
      ]) {
        expect(refusal(bytes.toString('base64')).message).to.equal('icon has an unreadable PNG header');
      }
    });

    it('accepts 1×1 and 1024×1024 and refuses a side of 0 or over 1024', () => {
      for (const [w, h] of [[1, 1], [1024, 1024]] as const) {
        expect(() => store.parse(png(w, h).toString('base64'), 'create', FIELD)).not.to.throw();
      }
      for (const [w, h] of [[0, 1], [1, 0], [1025, 1], [1, 1025]] as const) {
        expect(refusal(png(w, h).toString('base64')).message).to.equal(`icon must be from 1×1 to 1024×1024 pixels, got ${w}×${h}`);
      }
    });

    it('refuses a PNG that does not end with IEND', () => {
      const good = png(4, 4);
      for (const bytes of [good.subarray(0, -12), good.subarray(0, -1), Buffer.concat([good, Buffer.from([0])])]) {
        expect(refusal(bytes.toString('base64')).message).to.contain('IEND');
      }
    });
  });

  describe('save and url', () => {
    it('writes <sha256>.png once, byte for byte', async () => {
      const icon = store.parse(png(16, 16, { color: [1, 2, 3] }).toString('base64'), 'create', FIELD);
      await store.save(icon);
      await store.save(icon);
      expect(readdirSync(dir)).to.deep.equal([`${icon.sha256}.png`]); // no temporary file left
      expect(readFileSync(path.join(dir, `${icon.sha256}.png`)).equals(icon.bytes)).to.equal(true);
      expect(store.file(icon.sha256)).to.equal(path.join(dir, `${icon.sha256}.png`));
    });

    it('shows an icon at the CDN base read at each call, and null for no icon', () => {
      const key = sha256(png(1, 1));
      expect(store.url(key)).to.equal(`http://cdn.test/cdn/icons/${key}.png`);
      base = 'https://cdn.example.com';
      expect(store.url(key)).to.equal(`https://cdn.example.com/icons/${key}.png`);
      expect(store.url(null)).to.equal(null);
      expect(store.url(undefined)).to.equal(null);
    });

    it('takes only 64 lower-case hex characters as a key', async () => {
      const key = sha256(png(1, 1));
      for (const bad of ['../x', key.toUpperCase(), `${key}/../${key}`, key.slice(1), '']) {
        expect(() => store.url(bad)).to.throw();
        expect(() => store.file(bad)).to.throw();
        let refused = false;
        await store.save({ bytes: png(1, 1), sha256: bad }).catch(() => (refused = true));
        expect(refused).to.equal(true);
      }
      expect(existsSync(dir)).to.equal(false);
    });
  });
});

describe('icon CDN middleware', () => {
  const bytes = png(20, 10, { color: [200, 10, 10] });
  const key = sha256(bytes);
  let root: string;
  let server: http.Server;
  let port: number;

  /** Raw HTTP: fetch would normalise `..` and `%2e%2e` away before sending. */
  function request(method: string, rawPath: string, headers: Record<string, string> = {}) {
    return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method, path: rawPath, headers }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'signalboard-cdn-'));
    const store = new IconStore(path.join(root, 'icons'), () => 'unused');
    await store.save({ bytes, sha256: key });
    const app = new Koa();
    app.silent = true;
    app.use(envelope());
    app.use(cdn(store));
    app.use((ctx) => {
      ctx.body = 'passed on';
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(root, { recursive: true, force: true });
  });

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
    expect(answer.headers.etag).to.equal(`"${key}"`);
  });

  it('answers 304 to a matching If-None-Match and 200 to another', async () => {
    for (const tag of [`"${key}"`, `W/"${key}"`, `"other", "${key}"`, '*']) {
      const answer = await request('GET', `/cdn/icons/${key}.png`, { 'If-None-Match': tag });
      expect(answer.status, tag).to.equal(304);
      expect(answer.body.length).to.equal(0);
      expect(answer.headers.etag).to.equal(`"${key}"`);
      expect(answer.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    }
    const stale = await request('GET', `/cdn/icons/${key}.png`, { 'If-None-Match': '"other"' });
    expect(stale.status).to.equal(200);
    expect(stale.body.equals(bytes)).to.equal(true);
  });

  it('answers 404 in the envelope for a missing icon, a bad name or a traversal attempt', async () => {
    const missing = sha256(Buffer.from('never stored'));
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
    for (const [method, rawPath] of [['POST', `/cdn/icons/${key}.png`], ['DELETE', `/cdn/icons/${key}.png`], ['PUT', '/cdn/other']]) {
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
});
