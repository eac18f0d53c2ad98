/**
 * The conformance suite's client against a stand-in for a deployment's sign-in limit (a window of
 * one second, two requests in it), so that its pacing is seen request by request: with
 * `RateLimit-*` headers it waits for the window to reset and is never refused; a request meant to
 * provoke 429 is never held back; without the headers it runs into 429 and waits as `Retry-After`
 * says. The suite against the real service, limits on: tests/contract/conformance.test.ts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { ContractModel } from '../../tools/src/conformance/contract.js';
import { Client } from '../../tools/src/conformance/http.js';

const LIMIT = 2;
const WINDOW_MS = 1000;

/** A fixed window that starts with its first request, as the service's limiter does; 429 past `LIMIT`. */
function limitedServer(sendHeaders: boolean) {
  const seen = { answered: 0, refused: 0 };
  let windowStart = 0;
  let used = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const now = Date.now();
      if (now - windowStart >= WINDOW_MS) [windowStart, used] = [now, 0];
      used += 1;
      const reset = String(Math.ceil((windowStart + WINDOW_MS - now) / 1000));
      if (sendHeaders) {
        response.setHeader('RateLimit-Limit', String(LIMIT));
        response.setHeader('RateLimit-Remaining', String(Math.max(0, LIMIT - used)));
        response.setHeader('RateLimit-Reset', reset);
      }
      response.setHeader('Content-Type', 'application/json');
      if (used > LIMIT) {
        seen.refused += 1;
        response.writeHead(429, { 'Retry-After': reset }).end('{"success":false,"error":{"code":"rate_limited","message":"slow"}}');
      } else {
        seen.answered += 1;
        response.writeHead(401).end('{"success":false,"error":{"code":"invalid_credentials","message":"no"}}');
      }
    });
  });
  return { server, seen };
}

describe("the conformance suite's pacing, against a stand-in sign-in limit", function () {
  this.timeout(20_000);
  const contract = ContractModel.load();
  let server: Server | undefined;

  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  async function start(sendHeaders: boolean) {
    const limited = limitedServer(sendHeaders);
    server = limited.server;
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const client = new Client({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      contract,
      timeoutMs: 5_000,
      userAgent: 'conformance-pacing-test',
    });
    return { client, seen: limited.seen };
  }

  const login = { method: 'POST', path: '/v1/auth/login', json: { login: 'someone', password: 'wrong' } };

  it('with RateLimit-* headers, waits for the window to reset before the request it has no room for, and gets no 429', async () => {
    const { client, seen } = await start(true);
    for (let i = 0; i < 5; i++) expect((await client.send(login)).status).to.equal(401);
    expect(seen).to.deep.equal({ answered: 5, refused: 0 });
    expect(client.refusals).to.equal(0);
    expect(client.pacer.waits, 'one wait per full window').to.equal(2);
    expect(client.pacer.waitedMs).to.be.greaterThan(0);
    expect(client.pacer.signInRequests).to.equal(5);
  });

  it('never holds back a request meant to provoke 429, and waits for the window after it', async () => {
    const { client, seen } = await start(true);
    for (let i = 0; i < LIMIT; i++) await client.send(login);
    const provoked = await client.send({ ...login, expect429: true });
    expect(provoked.status).to.equal(429);
    expect([client.pacer.waits, client.refusals]).to.deep.equal([0, 0]);
    expect((await client.send(login)).status, 'the next request, after the reset').to.equal(401);
    expect(client.pacer.waits).to.equal(1);
    expect(seen).to.deep.equal({ answered: LIMIT + 1, refused: 1 });
  });

  it('without the headers, is not paced: runs into 429, waits as Retry-After says and sends the request again', async () => {
    const { client, seen } = await start(false);
    for (let i = 0; i < LIMIT + 1; i++) expect((await client.send(login)).status).to.equal(401);
    expect(seen).to.deep.equal({ answered: LIMIT + 1, refused: 1 });
    expect([client.refusals, client.pacer.waits]).to.deep.equal([1, 1]);
  });
});
