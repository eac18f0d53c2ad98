/** Headers every answer carries, CORS, and the process logger's censoring. Rate limits: tests/http/rate-limits.test.ts. */
import { expect } from 'chai';
import { censorSecrets, createLogger, infoLineWriter } from '../../server/src/logger.js';
import { LINE_FIELDS } from '../../server/src/http/request-log.js';
import { startExtraServer } from '../support/harness.js';
import { http, send } from '../support/http.js';

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
    const preflight = await http('OPTIONS', '/v1/projects', {
      headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST' },
    });
    expect(preflight.status).to.equal(405);
  });

  it('allows exactly the configured origins, on the publishing routes (x-cors) only', async function () {
    this.timeout(60_000);
    const server = await startExtraServer({ CORS_ORIGINS: 'https://app.example.com' });
    try {
      const publish = '/v1/projects/some-project/feeds/general/events';
      const preflight = await send(server.url, {
        method: 'OPTIONS',
        path: publish,
        headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST' },
      });
      expect(preflight.status).to.equal(204);
      expect(preflight.headers.get('access-control-allow-origin')).to.equal('https://app.example.com');
      expect(preflight.headers.get('access-control-allow-methods')).to.equal('POST');
      // What a page sends to publish (its token, a JSON body, a key on every keyed write), and no more.
      expect((preflight.headers.get('access-control-allow-headers') ?? '').split(', ')).to.deep.equal([
        'Authorization',
        'Content-Type',
        'Idempotency-Key',
      ]);
      expect(preflight.headers.get('vary')).to.contain('Origin');
      // The answer itself, a refusal included, is readable by the page.
      const refused = await send(server.url, { method: 'POST', path: publish, headers: { Origin: 'https://app.example.com' }, json: {} });
      expect(refused.status).to.equal(401);
      expect(refused.headers.get('access-control-allow-origin')).to.equal('https://app.example.com');
      const exposed = (refused.headers.get('access-control-expose-headers') ?? '').split(', ');
      expect(exposed).to.include.members(['Idempotent-Replayed', 'X-Request-Id', 'Retry-After', 'WWW-Authenticate']);
      // Another origin gets the answer, and no permission to read it.
      const other = await send(server.url, { method: 'POST', path: publish, headers: { Origin: 'https://evil.example.net' }, json: {} });
      expect(other.status).to.equal(401);
      expect(other.headers.get('access-control-allow-origin')).to.equal(null);
      // Every other route answers as with CORS off.
      const notPublishing = await send(server.url, {
        method: 'OPTIONS',
        path: '/v1/projects',
        headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST' },
      });
      expect(notPublishing.status).to.equal(405);
      expect(notPublishing.headers.get('access-control-allow-origin')).to.equal(null);
      const simple = await send(server.url, { method: 'GET', path: '/v1', headers: { Origin: 'https://app.example.com' } });
      expect(simple.status).to.equal(200);
      expect(simple.headers.get('access-control-allow-origin')).to.equal(null);
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
    expect(logged({ err: { type: 'DriverException', code: '57P01', token: 'api_xyz' } }).err).to.deep.equal({
      type: 'DriverException',
      code: '57P01',
      token: '[redacted]',
    });
    // What the caller logged is left as it was.
    expect(body.password).to.equal('hunter2-secret');
    expect(headers.authorization).to.equal('Bearer ses_abc');
  });

  it('passes a line with nothing to censor through unchanged', () => {
    const request = { method: 'GET', path: '/v1/projects/acme', operationId: 'getProject', status: 200, ms: 1.5 };
    expect(censorSecrets(request)).to.equal(request);
    expect(logged(request)).to.include(request);
  });

  it("writes the request line byte for byte as pino's info() does, but for the time; nothing below info", () => {
    const lines: string[] = [];
    const logger = createLogger('info', 'json', { write: (line: string) => lines.push(line) });
    const fields = { requestId: 'r-1', method: 'GET', path: '/v1/a "quoted" \\ päth\n', operationId: undefined, status: 404, ms: 0.3 };
    logger.info(fields, 'request');
    infoLineWriter(logger, 'request', LINE_FIELDS)(fields);
    const [byPino, byWriter] = lines.map((line) => line.replace(/"time":\d+/, '"time":0'));
    expect(byWriter).to.equal(byPino);
    const { operationId: _leftOut, ...shown } = fields;
    expect(JSON.parse(byWriter!)).to.deep.equal({ level: 30, time: 0, service: 'signalboard', ...shown, msg: 'request' });

    const quiet: string[] = [];
    infoLineWriter(createLogger('warn', 'json', { write: (line: string) => quiet.push(line) }), 'request', LINE_FIELDS)(fields);
    expect(quiet).to.deep.equal([]);
  });
});
