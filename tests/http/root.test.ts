import { expect } from 'chai';
import { client, startExtraServer } from '../support/harness.js';
import { http, send } from '../support/http.js';

describe('GET /v1', () => {
  it('greets without a credential', async () => {
    const { data, response } = await client().GET('/v1');
    expect(response.status).to.equal(200);
    expect(data).to.deep.equal({
      success: true,
      // The run's service keeps the default WEBHOOK_DISABLE_AFTER (3 days).
      data: { message: data!.data.message, webhooks: { disable_after_seconds: 259_200, max_pending_deliveries: 10_000 } },
    });
    expect(data!.data.message).to.be.a('string').and.not.be.empty;
  });

  it("says the operator's webhook limits", async () => {
    const server = await startExtraServer({ WEBHOOK_DISABLE_AFTER: '12h' });
    try {
      const answer = await send(server.url, { method: 'GET', path: '/v1' });
      expect(answer.status).to.equal(200);
      expect(answer.json.data.webhooks).to.deep.equal({ disable_after_seconds: 43_200, max_pending_deliveries: 10_000 });
    } finally {
      await server.close();
    }
  });

  it('answers the same with the Token scheme or any credential, valid or not', async () => {
    const plain = await http('GET', '/v1');
    for (const authorization of ['Token abc', 'Bearer ses_unknown', 'garbage']) {
      const answer = await http('GET', '/v1', { headers: { Authorization: authorization } });
      expect(answer.status).to.equal(200);
      expect(answer.json).to.deep.equal(plain.json);
    }
  });
});

describe('the envelope around every failure', () => {
  it('answers an unknown route with 404 not_found', async () => {
    const answer = await http('GET', '/v1/no-such-thing');
    expect(answer.status).to.equal(404);
    expect(answer.json).to.deep.equal({ success: false, error: { code: 'not_found', message: 'No route matches this path.' } });
  });

  it('answers a known path with the wrong method with 405 and Allow', async () => {
    const answer = await http('PUT', '/v1/auth/signup');
    expect(answer.status).to.equal(405);
    expect(answer.headers.get('allow')).to.equal('POST');
    expect(answer.json.success).to.equal(false);
    expect(answer.json.error.code).to.equal('method_not_allowed');
  });

  it('gives every answer an X-Request-Id, keeping a well-formed one from the caller', async () => {
    const mine = await http('GET', '/v1', { headers: { 'X-Request-Id': 'trace-123' } });
    expect(mine.headers.get('x-request-id')).to.equal('trace-123');
    const bad = await http('GET', '/v1/nope', { headers: { 'X-Request-Id': 'has spaces and "quotes"' } });
    expect(bad.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
  });
});

describe('operations', () => {
  it('serves the contract at /v1/openapi.json', async () => {
    const answer = await http('GET', '/v1/openapi.json');
    expect(answer.status).to.equal(200);
    expect(answer.json.openapi).to.equal('3.0.0');
    expect(answer.json.paths).to.have.property('/v1/auth/signup');
  });

  it('reports liveness and readiness', async () => {
    expect((await http('GET', '/healthz')).json).to.deep.equal({ success: true, data: { status: 'ok' } });
    expect((await http('GET', '/readyz')).json).to.deep.equal({ success: true, data: { status: 'ok' } });
  });
});
