/** Headers every answer carries, CORS, and the process logger's censoring and error serializer. Rate limits: tests/http/rate-limits.test.ts. */
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { expect } from 'chai';
import pg from 'pg';
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
    // What the caller logged is left as it was.
    expect(body.password).to.equal('hunter2-secret');
    expect(headers.authorization).to.equal('Bearer ses_abc');
  });

  it("logs an error's type, codes and call frames, never its message nor its other fields, however it is logged", () => {
    const SECRET = 'whsec_logged-secret';
    // A unique violation as the driver raises it and MikroORM wraps it: the message holds the SQL with
    // its values, `detail` the duplicate value; the cause's message a URL with its credentials.
    const driver = Object.assign(new pg.DatabaseError(`insert into tokens values ('${SECRET}')`, 0, 'error'), {
      code: '23505',
      constraint: 'tokens_hash_unique',
      detail: `Key (hash)=(${SECRET}) already exists.`,
    });
    const reach = (): never => {
      throw new Error(`could not reach https://user:${SECRET}@example.test/`, { cause: new UniqueConstraintViolationException(driver) });
    };
    let caught: unknown;
    try {
      reach();
    } catch (error) {
      caught = error;
    }

    const lines: string[] = [];
    const logger = createLogger('info', 'json', { write: (line: string) => lines.push(line) }).child({ requestId: 'r-1' });
    logger.warn({ err: caught }, 'delivery failed');
    logger.warn({ err: caught });
    logger.error(caught as Error);
    logger.warn({ err: `thrown text ${SECRET}` }, 'thrown text');
    logger.warn({ err: { name: 'Odd', code: `not a code ${SECRET}`, token: SECRET, statusCode: 502 } }, 'an object thrown');

    expect(lines).to.have.length(5);
    for (const line of lines) expect(line).not.to.include(SECRET).and.not.to.include('logged-secret');
    const [first, second, third, text, odd] = lines.map((line) => JSON.parse(line) as Record<string, any>);
    expect(first!.msg).to.equal('delivery failed');
    expect(first!.err).to.have.keys('type', 'stack', 'cause');
    expect(first!.err.type).to.equal('Error');
    expect(first!.err.stack[0]).to.match(/^at reach \(.*limits-security\.test\.ts:\d+:\d+\)$/);
    expect(first!.err.stack.length).to.be.within(1, 8);
    expect(first!.err.cause).to.include({ type: 'UniqueConstraintViolationException', code: '23505', constraint: 'tokens_hash_unique' });
    expect(first!.err.cause).to.have.keys('type', 'code', 'constraint', 'stack');
    // Without a message of its own, a line is not given its error's.
    expect(second!.msg).to.equal('error');
    expect(second!.err).to.deep.equal(first!.err);
    expect(third!.msg).to.equal('error');
    expect(third!.err).to.deep.equal(first!.err);
    expect(text!.err).to.deep.equal({ type: 'string' });
    expect(odd!.err).to.deep.equal({ type: 'Odd', statusCode: 502 });
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
