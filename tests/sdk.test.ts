import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createClient, paginate, SignalboardError } from '../sdk/src/index.js';
import { baseUrl } from './support/harness.js';
import { signUp, uniqueName } from './support/accounts.js';

describe('SDK helpers', function () {
  this.timeout(60_000);

  it('paginate walks every page of a list as one async iterator, newest first', async () => {
    const owner = await signUp();
    const sb = createClient({ baseUrl: baseUrl(), token: owner.token });
    const namespace = uniqueName('sdk').replace(/_/g, '-').slice(0, 40).replace(/-+$/, '');
    expect((await sb.POST('/v1/projects', { body: { name: 'Paged', namespace } })).response.status).to.equal(201);
    const created: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { data } = await sb.POST('/v1/projects/{namespace}/insights', {
        params: { path: { namespace } },
        body: { title: `n${i}`, value: i },
      });
      created.push(data!.data.id);
    }
    const seen: string[] = [];
    for await (const insight of paginate(sb, '/v1/projects/{namespace}/insights', { path: { namespace }, query: { limit: 3 } }))
      seen.push(insight.id);
    expect(seen).to.deep.equal([...created].reverse());
  });

  it('paginate throws a SignalboardError carrying status and code when a page is refused', async () => {
    const sb = createClient({ baseUrl: baseUrl(), token: (await signUp()).token });
    const pages = paginate(sb, '/v1/projects/{namespace}/insights', { path: { namespace: 'no-such-project' } });
    const error = await pages.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(SignalboardError);
    expect(error).to.include({ status: 404, code: 'not_found' });
  });

  it('honours Retry-After on 429 when asked to, and answers the 429 when not', async () => {
    let calls = 0;
    const stand = http.createServer((_req, res) => {
      calls += 1;
      if (calls % 2 === 1) {
        res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '1' });
        res.end(JSON.stringify({ success: false, error: { code: 'rate_limited', message: 'slow down' } }));
      } else {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ success: true, data: { message: 'hi' } }));
      }
    });
    await new Promise<void>((resolve) => stand.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(stand.address() as AddressInfo).port}`;
    try {
      const started = Date.now();
      const patient = await createClient({ baseUrl: url, retryOnRateLimit: 2 }).GET('/v1');
      expect(patient.response.status).to.equal(200);
      expect(Date.now() - started).to.be.at.least(1000);
      expect(calls).to.equal(2);
      const plain = await createClient({ baseUrl: url }).GET('/v1');
      expect(plain.response.status).to.equal(429);
      expect(plain.error).to.deep.equal({ success: false, error: { code: 'rate_limited', message: 'slow down' } });
    } finally {
      stand.close();
    }
  });
});
