/**
 * What a webhook endpoint can reach, and what one endpoint can do to the others, through the
 * service: every spelling of a non-public address is refused at creation on the run's own server
 * (default settings: https only, public addresses only) and nothing is stored or connected to; on a
 * server that allows http but not private addresses, a name resolving to loopback is accepted and
 * then refused at every attempt, before any connection; redirects are not followed, answers are
 * cut at 64 KiB, an attempt ends at WEBHOOK_TIMEOUT_MS; and an endpoint that never answers does not
 * delay the deliveries of other endpoints, of its project or another.
 * tests/unit/address-guard.test.ts holds the guard's rules on their own.
 */
import dns from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { signUp, signUpOn, type TestUser } from '../support/accounts.js';
import { count, sql, type TestServer } from '../support/harness.js';
import { call, callAt, expectData, expectInvalid, expectNoContent, type Answer } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { Receiver, startWebhookServer } from '../support/receiver.js';
import { REFUSED_HOSTS } from '../support/refused-hosts.js';

/** The one refusal of an address, whatever the reason: at creation (a 400's detail) and in an attempt's error. */
const REFUSED = 'does not resolve to a public address';
const REFUSED_ATTEMPT = `refused: the URL ${REFUSED}`;

/**
 * The shortest keep-alive the servers allow: fetch keeps idle connections to a server until about
 * then, and a server's close waits for them (http/drain.ts), about 4 s with the default.
 */
const QUICK_CLOSE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it answers something, for at most `ms`. */
async function waitUntil<T>(probe: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`the condition did not hold within ${ms} ms`);
    await sleep(50);
  }
}

/**
 * A name of /etc/hosts, other than localhost and its subdomains (which the guard refuses by name at
 * creation), that resolves to loopback addresses only: one resolving to 127.0.0.1, where the
 * Receiver listens (so a connection the guard let through would be counted), if the machine has
 * one, else one resolving to ::1 (Debian's ip6-localhost). Undefined when it has neither.
 */
async function loopbackName(): Promise<string | undefined> {
  let hosts: string;
  try {
    hosts = readFileSync('/etc/hosts', 'utf8');
  } catch {
    return undefined;
  }
  const entries = hosts.split('\n').map((line) => line.replace(/#.*/, '').trim().split(/\s+/));
  const namesOf = (address: RegExp) =>
    entries
      .filter(([first]) => first !== undefined && address.test(first))
      .flatMap(([, ...names]) => names)
      .filter((name) => name !== '' && !/(^|\.)localhost\.?$/i.test(name));
  for (const name of [...namesOf(/^127\./), ...namesOf(/^::1$/)]) {
    const addresses = await dns.lookup(name, { all: true }).catch(() => []);
    if (addresses.length > 0 && addresses.every((a) => a.address === '127.0.0.1' || a.address === '::1')) return name;
  }
  return undefined;
}

describe('webhooks: SSRF guard and isolation', function () {
  this.timeout(30_000);

  describe("on the run's server (https only, no private addresses)", () => {
    let owner: TestUser;
    let namespace: string;
    let receiver: Receiver;

    before(async () => {
      owner = await signUp();
      namespace = (await createProject(owner.token)).namespace;
      receiver = await Receiver.start();
    });
    after(async () => {
      await receiver?.close();
    });

    it('refuses every spelling of a non-public address with 400 on /body/url, storing nothing and connecting nowhere', async () => {
      const port = new URL(receiver.url).port;
      const before = await count('select count(*)::int from webhook_endpoints');
      const urls = REFUSED_HOSTS.flatMap((host) => [`https://${host}/hook`, `https://${host}:${port}/hook`]);
      for (const url of urls) {
        const answer = await call('POST', projectPath(namespace, '/webhooks'), owner.token, { url });
        expectInvalid(answer, '/body/url', url);
        expect(answer.json.error, url).to.deep.equal({
          code: 'invalid_request',
          message: `url ${REFUSED}`,
          details: [{ path: '/body/url', message: REFUSED }],
        });
      }
      // Changing an endpoint's URL is held to the same rule.
      const endpoint = expectData(
        await call('POST', projectPath(namespace, '/webhooks'), owner.token, { url: 'https://hooks.example.com/signalboard' }),
        201,
      );
      for (const host of ['127.0.0.1', '0x7f.1', '[::ffff:7f00:1]', 'LOCALHOST.']) {
        const url = `https://${host}:${port}/hook`;
        expectInvalid(await call('PATCH', projectPath(namespace, `/webhooks/${endpoint.id}`), owner.token, { url }), '/body/url', url);
      }
      const shown = expectData(await call('GET', projectPath(namespace, `/webhooks/${endpoint.id}`), owner.token));
      expect(shown.url).to.equal('https://hooks.example.com/signalboard');
      expect(await count('select count(*)::int from webhook_endpoints')).to.equal(before + 1);
      expect(receiver.connections).to.equal(0);
      expectNoContent(await call('DELETE', projectPath(namespace, `/webhooks/${endpoint.id}`), owner.token));
      expect(await count('select count(*)::int from webhook_endpoints')).to.equal(before);
    });

    it('refuses http, and a user name or password in the URL', async () => {
      for (const url of [
        receiver.url + '/hook',
        'http://example.com/hook',
        'https://user:pw@example.com/hook',
        'https://user@example.com/',
      ]) {
        expectInvalid(await call('POST', projectPath(namespace, '/webhooks'), owner.token, { url }), '/body/url', url);
      }
      expect(receiver.connections).to.equal(0);
    });
  });

  describe('on a server allowing http but not private addresses', () => {
    let server: TestServer;
    let owner: TestUser;
    let namespace: string;
    let receiver: Receiver;
    let name: string | undefined;
    const api = (method: string, path: string, body?: unknown): Promise<Answer> =>
      callAt(server.url, method, projectPath(namespace, path), owner.token, body);

    before(async () => {
      name = await loopbackName();
      server = await startWebhookServer({ ...QUICK_CLOSE, WEBHOOK_ALLOW_PRIVATE: '' });
      owner = await signUpOn(server);
      namespace = (await createProject(owner.token, {}, server.url)).namespace;
      receiver = await Receiver.start();
    });
    after(async () => {
      await receiver?.close();
      await server?.close();
    });

    it('still refuses loopback addresses and localhost at creation', async () => {
      const port = new URL(receiver.url).port;
      for (const host of ['127.0.0.1', '2130706433', '[::ffff:7f00:1]', 'localhost', 'LOCALHOST.']) {
        const url = `http://${host}:${port}/hook`;
        const answer = await api('POST', '/webhooks', { url });
        expectInvalid(answer, '/body/url', url);
        expect(answer.json.error.details, url).to.deep.equal([{ path: '/body/url', message: REFUSED }]);
      }
      expect(await count('select count(*)::int from webhook_endpoints', [], server.db)).to.equal(0);
    });

    it('accepts a name resolving to loopback, then refuses it at every attempt before connecting', async function () {
      if (!name) this.skip();
      const url = `http://${name}:${new URL(receiver.url).port}/hook`;
      const endpoint = expectData(await api('POST', '/webhooks', { url }), 201);
      expect(endpoint.url).to.equal(url);

      const test = expectData(await api('POST', `/webhooks/${endpoint.id}/test`));
      expect(test).to.include({ status_code: null, body: null });
      expect(test.error).to.match(/^refused: /);

      expectData(await api('POST', '/feeds/general/events', { event: 'to a loopback name' }), 201);
      // The schedule is 300 ms then 600 ms: three attempts, then failed.
      const [delivery] = await waitUntil(async () => {
        const items = expectData(await api('GET', `/webhooks/${endpoint.id}/deliveries`)).items;
        return items[0]?.state === 'failed' ? items : undefined;
      });
      expect(delivery.attempts).to.have.length(3);
      for (const attempt of delivery.attempts) {
        expect(attempt).to.include({ status_code: null, body: null });
        expect(attempt.error).to.equal(REFUSED_ATTEMPT);
      }
      expect(receiver.connections).to.equal(0);
      expect(receiver.received).to.have.length(0);
    });

    it('answers a name that does not resolve exactly as one resolving to loopback, on test and in every attempt', async function () {
      if (!name) this.skip();
      const port = new URL(receiver.url).port;
      for (const host of [name, 'signalboard-nowhere.invalid']) {
        const endpoint = expectData(
          await api('POST', '/webhooks', { url: `http://${host}:${port}/hook`, filter: { feeds: ['general'] } }),
          201,
        );
        const test = await api('POST', `/webhooks/${endpoint.id}/test`);
        expect(test.status).to.equal(200);
        expect(test.json.data).to.include({ status_code: null, body: null, error: REFUSED_ATTEMPT });
      }
      expectData(await api('POST', '/feeds/general/events', { event: 'to names that lead nowhere public' }), 201);
      for (const endpoint of expectData(await api('GET', '/webhooks')).items) {
        const [delivery] = await waitUntil(async () => {
          const items = expectData(await api('GET', `/webhooks/${endpoint.id}/deliveries`)).items;
          return items[0]?.state === 'failed' ? items : undefined;
        });
        expect(delivery.attempts.map((a: { error: string }) => a.error)).to.deep.equal([REFUSED_ATTEMPT, REFUSED_ATTEMPT, REFUSED_ATTEMPT]);
      }
      const [stored] = await sql<{ errors: string[] }>(
        `select array_agg(distinct a->>'error') as errors from webhook_deliveries d, jsonb_array_elements(d.log) a`,
        [],
        server.db,
      );
      expect(stored!.errors).to.deep.equal([REFUSED_ATTEMPT]);
      expect(receiver.connections).to.equal(0);
    });
  });

  describe('on a server allowing private addresses, with WEBHOOK_TIMEOUT_MS=3000', () => {
    let server: TestServer;
    let owner: TestUser;
    let namespace: string;
    const api = (method: string, path: string, body?: unknown): Promise<Answer> =>
      callAt(server.url, method, projectPath(namespace, path), owner.token, body);
    const createEndpoint = async (url: string) => expectData(await api('POST', '/webhooks', { url }), 201);
    const closing: { close: () => Promise<void> }[] = [];
    /** The delivery of the endpoint's only event, once `done` says it is settled. */
    const settled = async (endpointId: string, done: (delivery: any) => boolean) =>
      waitUntil(async () => {
        const [delivery] = expectData(await api('GET', `/webhooks/${endpointId}/deliveries`)).items;
        return delivery && done(delivery) ? delivery : undefined;
      });

    before(async () => {
      server = await startWebhookServer({ ...QUICK_CLOSE, WEBHOOK_TIMEOUT_MS: '3000' });
      owner = await signUpOn(server);
      namespace = (await createProject(owner.token, {}, server.url)).namespace;
    });
    after(async () => {
      await server?.close();
    });
    afterEach(async () => {
      for (const endpoint of expectData(await api('GET', '/webhooks')).items) await api('DELETE', `/webhooks/${endpoint.id}`);
      // Closing a receiver that hangs ends the attempts at it at once, so the server stops without waiting for them.
      await Promise.all(closing.splice(0).map((c) => c.close()));
    });

    it('does not follow a redirect: the 302 is the attempt, logged and retried, and its Location sees nothing', async () => {
      const target = await Receiver.start();
      const redirector = await RawServer.start((_request, response) => {
        response.writeHead(302, { location: target.url + '/stolen', 'content-type': 'text/plain' }).end('moved');
      });
      closing.push(target, redirector);
      const endpoint = await createEndpoint(redirector.url + '/hook');

      const test = expectData(await api('POST', `/webhooks/${endpoint.id}/test`));
      expect(test).to.include({ status_code: 302, body: 'moved', error: null });

      expectData(await api('POST', '/feeds/general/events', { event: 'redirected' }), 201);
      const delivery = await settled(endpoint.id, (d) => d.state === 'failed');
      expect(delivery.attempts.map((a: { status_code: number }) => a.status_code)).to.deep.equal([302, 302, 302]);
      for (const attempt of delivery.attempts) expect(attempt).to.include({ body: 'moved', error: null });
      expect(redirector.requests).to.equal(4);
      expect(target.connections).to.equal(0);
      expect(target.received).to.have.length(0);
    });

    it('reads at most 64 KiB of an answer and keeps its first 1 KiB', async () => {
      // More than 64 KiB at once, and then the answer never ends: only a reader that stops at 64 KiB
      // comes back with an answer rather than a timeout.
      const endless = await RawServer.start((_request, response) => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        response.write('y'.repeat(100 * 1024));
      });
      const large = await Receiver.start();
      large.answer = () => ({ status: 200, body: 'z'.repeat(1024 * 1024) });
      closing.push(endless, large);

      const toEndless = await createEndpoint(endless.url + '/hook');
      const test = expectData(await api('POST', `/webhooks/${toEndless.id}/test`));
      expect(test).to.include({ status_code: 200, body: 'y'.repeat(1024), error: null });
      expect(test.duration_ms).to.be.below(3_000);

      const toLarge = await createEndpoint(large.url + '/hook');
      expectData(await api('POST', '/feeds/general/events', { event: 'large answers' }), 201);
      for (const endpoint of [toEndless, toLarge]) {
        const delivery = await settled(endpoint.id, (d) => d.state === 'delivered');
        expect(delivery.attempts).to.have.length(1);
        expect(delivery.attempts[0]).to.include({ status_code: 200, error: null });
        expect(delivery.attempts[0].body).to.have.length(1024);
      }
    });

    it('delivers to healthy endpoints, of the same project and another, while another endpoint never answers', async () => {
      const [hanging, beside, elsewhere] = await Promise.all([Receiver.start(), Receiver.start(), Receiver.start()]);
      hanging.answer = () => 'hang';
      closing.push(hanging, beside, elsewhere);
      const other = (await createProject(owner.token, {}, server.url)).namespace;
      const otherApi = (method: string, path: string, body?: unknown): Promise<Answer> =>
        callAt(server.url, method, projectPath(other, path), owner.token, body);
      const stuck = await createEndpoint(hanging.url + '/hook');
      await createEndpoint(beside.url + '/hook');
      const elsewhereEndpoint = expectData(await otherApi('POST', '/webhooks', { url: elsewhere.url + '/hook' }), 201);

      const events = Array.from({ length: 40 }, (_, i) => ({ feed: 'general', event: `event ${i}` }));
      const started = Date.now();
      await Promise.all([api, otherApi].map(async (to) => expectData(await to('POST', '/events', { events }), 201)));
      await Promise.all([beside.waitFor(40, 3_000), elsewhere.waitFor(40, 3_000), hanging.waitFor(1, 3_000)]);
      const took = Date.now() - started;
      expect(took, 'before the hanging attempts time out').to.be.below(3_000);
      // None of the hanging endpoint's attempts has ended yet: the others did not wait for them.
      const waiting = expectData(await api('GET', `/webhooks/${stuck.id}/deliveries?limit=100`)).items;
      expect(waiting).to.have.length(40);
      for (const delivery of waiting) expect(delivery.attempts).to.deep.equal([]);
      for (const receiver of [beside, elsewhere]) {
        const names = receiver.received.map((r) => JSON.parse(r.body).data.event);
        expect(new Set(names)).to.deep.equal(new Set(events.map((e) => e.event)));
      }
      // The hanging endpoint was being tried all along.
      expect(hanging.received.length).to.be.at.least(1);
      console.log(`      40 events to each healthy endpoint in ${took} ms; ${hanging.received.length} attempts hanging meanwhile`);
      expectNoContent(await otherApi('DELETE', `/webhooks/${elsewhereEndpoint.id}`));
    });
  });

  describe('on a server allowing private addresses, with WEBHOOK_TIMEOUT_MS=500', () => {
    let server: TestServer;
    let owner: TestUser;
    let namespace: string;
    const api = (method: string, path: string, body?: unknown): Promise<Answer> =>
      callAt(server.url, method, projectPath(namespace, path), owner.token, body);
    const createEndpoint = async (url: string) => expectData(await api('POST', '/webhooks', { url }), 201);
    const closing: { close: () => Promise<void> }[] = [];

    before(async () => {
      server = await startWebhookServer({ ...QUICK_CLOSE, WEBHOOK_TIMEOUT_MS: '500' });
      owner = await signUpOn(server);
      namespace = (await createProject(owner.token, {}, server.url)).namespace;
    });
    after(async () => {
      await Promise.all(closing.splice(0).map((c) => c.close()));
      await server?.close();
    });

    it('ends an attempt at WEBHOOK_TIMEOUT_MS, whether no answer comes or one trickles in', async () => {
      const hanging = await Receiver.start();
      hanging.answer = () => 'hang';
      const trickling = await RawServer.start((_request, response) => {
        response.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => response.write('.'), 50);
        response.on('close', () => clearInterval(timer));
      });
      closing.push(hanging, trickling);
      for (const receiverUrl of [hanging.url, trickling.url]) {
        const endpoint = await createEndpoint(receiverUrl + '/hook');
        const started = Date.now();
        const test = expectData(await api('POST', `/webhooks/${endpoint.id}/test`));
        const took = Date.now() - started;
        expect(took, receiverUrl).to.be.within(450, 1_500);
        expect(test, receiverUrl).to.include({ status_code: null, body: null, error: 'no answer within 500 ms' });
        expect(test.duration_ms, receiverUrl).to.be.within(490, 1_200);
      }
      expect(hanging.received).to.have.length(1);
      expect(trickling.requests).to.equal(1);
    });
  });
});

/** A bare `node:http` server for answers the Receiver cannot give (a Location header, an answer that never ends). */
class RawServer {
  connections = 0;
  requests = 0;

  private constructor(private readonly server: http.Server) {}

  static async start(handle: (request: http.IncomingMessage, response: http.ServerResponse) => void): Promise<RawServer> {
    const server = http.createServer();
    const raw = new RawServer(server);
    server.on('connection', () => raw.connections++);
    server.on('request', (request: http.IncomingMessage, response: http.ServerResponse) => {
      raw.requests++;
      request.resume();
      request.on('end', () => handle(request, response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return raw;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
