/**
 * What the icon tests read of a service's icons: raw HTTP under /cdn (fetch would normalise `..`
 * away), the answers an icon must get, and its row in a database.
 */
import { expect } from 'chai';
import http from 'node:http';
import type { RunningServer } from '../../server/src/server.js';
import { database, sql } from './harness.js';

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request to the server at `origin` (or on 127.0.0.1 at a port), sent as written. */
export function rawRequest(
  origin: string | number,
  method: string,
  rawPath: string,
  headers: Record<string, string> = {},
): Promise<RawAnswer> {
  const { hostname, port } = typeof origin === 'number' ? { hostname: '127.0.0.1', port: String(origin) } : new URL(origin);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, method, path: rawPath, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
    });
    req.on('error', reject);
    req.end();
  });
}

const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * The service at `origin` serves `bytes` as the icon `key`: GET 200 with the bytes, as an immutable
 * PNG with the hash as a strong ETag; HEAD the same without a body; 304 to If-None-Match.
 */
export async function expectIconServed(origin: string, key: string, bytes: Buffer): Promise<void> {
  const path = `/cdn/icons/${key}.png`;
  const got = await rawRequest(origin, 'GET', path);
  expect(got.status, `GET ${origin}${path}`).to.equal(200);
  expect(got.body.equals(bytes), 'the bytes stored').to.equal(true);
  expect(got.headers['content-type']).to.equal('image/png');
  expect(got.headers['content-length']).to.equal(String(bytes.length));
  expect(got.headers['cache-control']).to.equal(IMMUTABLE);
  expect(got.headers.etag).to.equal(`"${key}"`);
  expect(got.headers['x-content-type-options']).to.equal('nosniff');

  const head = await rawRequest(origin, 'HEAD', path);
  expect([head.status, head.body.length]).to.deep.equal([200, 0]);
  expect(head.headers['content-length']).to.equal(String(bytes.length));
  expect([head.headers['cache-control'], head.headers.etag]).to.deep.equal([IMMUTABLE, `"${key}"`]);

  const conditional = await rawRequest(origin, 'GET', path, { 'If-None-Match': `"${key}"` });
  expect([conditional.status, conditional.body.length]).to.deep.equal([304, 0]);
  expect([conditional.headers['cache-control'], conditional.headers.etag]).to.deep.equal([IMMUTABLE, `"${key}"`]);
}

export interface IconRow {
  size: number;
  /** Null when a bucket holds the bytes. */
  bytes: Buffer | null;
  /** Stored (or saved again) within the last minute. */
  fresh: boolean;
}

/** The icon's row in the run's database, or in `db`. */
export async function iconRow(key: string, db: RunningServer['db'] = database()): Promise<IconRow | undefined> {
  const [row] = await sql<IconRow>(
    `select size, bytes, stored_at > now() - interval '1 minute' as fresh from icons where sha256 = ?`,
    [key],
    db,
  );
  return row;
}
