/**
 * Rate limits other than sign-in count in each instance's memory and add up across instances in
 * batches (server/src/http/rate-counter.ts): a request writes nothing to be counted, and a caller
 * spread over several instances gets at most the limit plus each instance's allowance (a tenth of
 * the limit) in a window, then 429 with `Retry-After`. PostgreSQL only: with the embedded database
 * there is one instance, which counts exactly (tests/http/rate-limits.test.ts).
 */
import { expect } from 'chai';
import type { RunningServer } from '../../server/src/server.js';
import { signUpOn } from '../support/accounts.js';
import { database, sql, startRateLimitedServer } from '../support/harness.js';
import { callAt } from '../support/http.js';
import { statementsDuring } from '../support/statements.js';

describe('rate limits across instances', function () {
  this.timeout(120_000);
  const servers: RunningServer[] = [];

  before(function () {
    if (database().kind !== 'postgresql') this.skip();
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.close()));
    await sql('delete from rate_limits');
  });

  const read = (server: RunningServer, token: string) => callAt(server.url, 'GET', '/v1/users/me', token);

  it('counts a request without writing: one batch a second at most, where each request wrote its counter before', async () => {
    const server = await startRateLimitedServer({ API_RATE_LIMIT: '1000' });
    servers.push(server);
    const { token } = await signUpOn(server);
    const started = Date.now();
    const sent = await statementsDuring(async () => {
      for (let i = 0; i < 40; i++) expect((await read(server, token)).status).to.equal(200);
    });
    const seconds = Math.ceil((Date.now() - started) / 1000);
    const counting = sent.filter((text) => /rate_limits/.test(text));
    expect(counting.length, `${counting.length} statements on rate_limits in ${seconds} s for 40 requests`).to.be.at.most(seconds + 1);
  });

  it('holds a caller spread over two instances to the limit plus one allowance per instance, then 429 with Retry-After', async () => {
    const limit = 50;
    const allowance = limit / 10;
    const first = await startRateLimitedServer({ API_RATE_LIMIT: String(limit) });
    const second = await startRateLimitedServer({ API_RATE_LIMIT: String(limit) });
    servers.push(first, second);
    const { token } = await signUpOn(first);
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<typeof read>> | undefined;
    for (let i = 0; i < 3 * limit; i++) {
      const answer = await read(i % 2 === 0 ? first : second, token);
      statuses.push(answer.status);
      if (answer.status === 429) refused ??= answer;
    }
    const allowed = statuses.filter((status) => status === 200).length;
    expect(allowed, 'requests let through').to.be.within(limit, limit + 2 * allowance);
    expect(statuses.filter((status) => status !== 200 && status !== 429)).to.deep.equal([]);
    // Once refused on both, a caller stays refused for the rest of the window.
    expect(statuses.slice(-limit).every((status) => status === 429)).to.equal(true);
    expect(refused!.json.error.code).to.equal('rate_limited');
    expect(Number(refused!.headers.get('retry-after'))).to.be.within(1, 60);
    expect(refused!.headers.get('ratelimit-limit')).to.equal(String(limit));
    expect(refused!.headers.get('ratelimit-remaining')).to.equal('0');
    // The shared count holds what both instances let through (each adds its last batch within a second).
    const deadline = Date.now() + 3000;
    let stored = 0;
    while (Date.now() < deadline && stored < allowed) {
      stored = (await sql<{ points: number }>(`select points from rate_limits where key like 'api:user:%'`))[0]?.points ?? 0;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(stored).to.be.at.least(allowed);
  });
});
