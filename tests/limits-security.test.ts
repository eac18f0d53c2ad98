import { expect } from 'chai';
import { createInviteCode } from '../server/src/domain/invite-codes.js';
import { censorSecrets, createLogger } from '../server/src/logger.js';
import { http, secret, sql, startExtraServer, uniqueName } from './support/harness.js';
import type { RunningServer } from '../server/src/server.js';

async function call(server: RunningServer, method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  const response = await fetch(server.url + path, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined };
}

const login = (server: RunningServer, headers: Record<string, string> = {}) =>
  call(server, 'POST', '/v1/auth/login', { 'Content-Type': 'application/json', ...headers }, JSON.stringify({ login: 'nobody', password: 'wrong-password' }));

describe('rate limits', function () {
  this.timeout(120_000);
  let server: RunningServer;
  before(async () => {
    server = await startExtraServer({ AUTH_RATE_LIMIT: '3', API_RATE_LIMIT: '5', TRUST_PROXY: 'false' });
  });
  after(async () => {
    await server.close();
    await sql(`delete from rate_limits`);
  });

  it('allows sign-up and login AUTH_RATE_LIMIT times a minute per address, then answers 429 with Retry-After', async () => {
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const answer = await login(server);
      expect(answer.status).to.equal(401);
      expect(answer.headers.get('ratelimit-limit')).to.equal('3');
      remaining.push(answer.headers.get('ratelimit-remaining'));
    }
    expect(remaining).to.deep.equal(['2', '1', '0']);
    const refused = await login(server);
    expect(refused.status).to.equal(429);
    expect(refused.json).to.deep.equal({ success: false, error: { code: 'rate_limited', message: refused.json.error.message } });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).to.be.within(1, 60);
    expect(refused.headers.get('ratelimit-remaining')).to.equal('0');
  });

  it('ignores X-Forwarded-For unless TRUST_PROXY is set', async () => {
    const spoofed = await login(server, { 'X-Forwarded-For': '203.0.113.9' });
    expect(spoofed.status).to.equal(429);
  });

  it('counts other routes per credential, separately for each, and per address without one', async () => {
    // Its own server, so the accounts live in its database (embedded: a database of its own).
    const perCredential = await startExtraServer({ AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '5' });
    try {
      const account = async () => {
        const { code } = await createInviteCode(perCredential.db.orm.em.fork(), {});
        const username = uniqueName();
        const answer = await call(perCredential, 'POST', '/v1/auth/signup', { 'Content-Type': 'application/json' },
          JSON.stringify({ username, email: `${username}@example.com`, password: secret(`pw-${username}`), invite: secret(code) }));
        expect(answer.status).to.equal(201);
        return secret(answer.json.data.token as string);
      };
      const statuses = async (token?: string) => {
        const seen = [];
        for (let i = 0; i < 6; i++) {
          seen.push((await call(perCredential, 'GET', token ? '/v1/users/me' : '/v1', token ? { Authorization: `Bearer ${token}` } : {})).status);
        }
        return seen;
      };
      const [alice, bob] = [await account(), await account()];
      expect(await statuses(alice)).to.deep.equal([200, 200, 200, 200, 200, 429]);
      expect(await statuses(bob)).to.deep.equal([200, 200, 200, 200, 200, 429]);
      expect(await statuses()).to.deep.equal([200, 200, 200, 200, 200, 429]);
    } finally {
      await perCredential.close();
    }
  });

  it('never limits health checks', async () => {
    for (let i = 0; i < 8; i++) expect((await call(server, 'GET', '/healthz')).status).to.equal(200);
  });

  it('takes the address from X-Forwarded-For when TRUST_PROXY is set', async () => {
    const proxied = await startExtraServer({ AUTH_RATE_LIMIT: '1', TRUST_PROXY: 'true' });
    try {
      expect((await login(proxied, { 'X-Forwarded-For': '198.51.100.1' })).status).to.equal(401);
      expect((await login(proxied, { 'X-Forwarded-For': '198.51.100.1' })).status).to.equal(429);
      expect((await login(proxied, { 'X-Forwarded-For': '198.51.100.2' })).status).to.equal(401);
    } finally {
      await proxied.close();
    }
  });

  it('is off when the limit is 0 (the suite’s own server): no RateLimit headers', async () => {
    const answer = await http('GET', '/v1');
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('ratelimit-limit')).to.equal(null);
  });
});

describe('security headers and CORS', () => {
  it('sends nosniff, a restrictive CSP and no X-Powered-By on success and failure alike', async () => {
    for (const answer of [await http('GET', '/v1'), await http('GET', '/v1/nope'), await http('POST', '/v1/projects')]) {
      expect(answer.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(answer.headers.get('content-security-policy')).to.equal("default-src 'none'; frame-ancestors 'none'");
      expect(answer.headers.get('x-powered-by')).to.equal(null);
    }
  });

  it('has CORS off by default', async () => {
    const answer = await http('GET', '/v1', { headers: { Origin: 'https://app.example.com' } });
    expect(answer.headers.get('access-control-allow-origin')).to.equal(null);
    const preflight = await http('OPTIONS', '/v1/projects', { headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST' } });
    expect(preflight.status).to.equal(405);
  });

  it('allows exactly the configured origins', async function () {
    this.timeout(60_000);
    const server = await startExtraServer({ CORS_ORIGINS: 'https://app.example.com' });
    try {
      const preflight = await call(server, 'OPTIONS', '/v1/projects', { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST' });
      expect(preflight.status).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin')).to.equal('https://app.example.com');
      expect(preflight.headers.get('access-control-allow-headers')).to.contain('Authorization');
      const simple = await call(server, 'GET', '/v1', { Origin: 'https://app.example.com' });
      expect(simple.headers.get('access-control-allow-origin')).to.equal('https://app.example.com');
      expect(simple.headers.get('vary')).to.contain('Origin');
      const other = await call(server, 'GET', '/v1', { Origin: 'https://evil.example.net' });
      expect(other.status).to.equal(200);
      expect(other.headers.get('access-control-allow-origin')).to.equal(null);
    } finally {
      await server.close();
    }
  });
});

describe('the process logger', () => {
  /** What `createLogger` writes for one `info(object)` call, parsed. */
  function logged(object: Record<string, unknown>): Record<string, any> {
    const lines: string[] = [];
    const logger = createLogger('info', 'json', { write: (line: string) => lines.push(line) });
    logger.info(object, 'line');
    expect(lines).to.have.length(1);
    return JSON.parse(lines[0]!);
  }

  it('censors secrets one level into what it is given: header maps, bodies, and keys named like credentials', () => {
    const body = { login: 'alice', password: 'hunter2-secret', code: 'INVITE-123' };
    const headers = { authorization: 'Bearer ses_abc', 'user-agent': 'curl' };
    const line = logged({ req: { headers, token: 'api_xyz' }, body, headers: { authorization: 'Token api_xyz' }, step: 'sign-up' });
    expect(line.req).to.deep.equal({ headers: { authorization: '[redacted]', 'user-agent': 'curl' }, token: '[redacted]' });
    expect(line.body).to.deep.equal({ login: 'alice', password: '[redacted]', code: '[redacted]' });
    expect(line.headers).to.deep.equal({ authorization: '[redacted]' });
    expect(line.step).to.equal('sign-up');
    // An error's code (SQLSTATE, errno) is what an operator needs; anything else secret-named in it is not kept.
    expect(logged({ err: { type: 'DriverException', code: '57P01', token: 'api_xyz' } }).err).to.deep.equal({ type: 'DriverException', code: '57P01', token: '[redacted]' });
    // What the caller logged is left as it was.
    expect(body.password).to.equal('hunter2-secret');
    expect(headers.authorization).to.equal('Bearer ses_abc');
  });

  it('passes a line with nothing to censor through unchanged', () => {
    const request = { method: 'GET', path: '/v1/projects/acme', operationId: 'getProject', status: 200, ms: 1.5 };
    expect(censorSecrets(request)).to.equal(request);
    expect(logged(request)).to.include(request);
  });
});
