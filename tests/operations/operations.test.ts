import { expect } from 'chai';
import { startExtraServer } from '../support/harness.js';
import { http } from '../support/http.js';

describe('Prometheus metrics', function () {
  this.timeout(60_000);

  it('are off unless configured: /metrics is an unknown route', async () => {
    const answer = await http('GET', '/metrics');
    expect(answer.status).to.equal(404);
    expect(answer.json.error.code).to.equal('not_found');
  });

  it('count requests and time them by operation, show the pool, and ask for the token when one is set', async () => {
    const server = await startExtraServer({ METRICS_ENABLED: 'true', METRICS_TOKEN: 'scrape-secret-123' });
    try {
      await fetch(`${server.url}/v1`);
      await fetch(`${server.url}/v1/users/me`);
      const refused = await fetch(`${server.url}/metrics`);
      expect(refused.status).to.equal(401);
      const scraped = await fetch(`${server.url}/metrics`, { headers: { Authorization: 'Bearer scrape-secret-123' } });
      expect(scraped.status).to.equal(200);
      expect(scraped.headers.get('content-type')).to.contain('text/plain');
      const text = await scraped.text();
      expect(text).to.match(/signalboard_http_requests_total\{operation="getRoot",status="200"\} 1/);
      expect(text).to.match(/signalboard_http_requests_total\{operation="getCurrentUser",status="401"\} 1/);
      expect(text).to.match(/signalboard_http_request_duration_seconds_bucket\{le="0\.5",operation="getRoot"\} 1/);
      expect(text).to.match(/signalboard_db_pool_connections\{state="used"\} \d+/);
      expect(text).to.contain('process_resident_memory_bytes');
    } finally {
      await server.close();
    }
  });
});
