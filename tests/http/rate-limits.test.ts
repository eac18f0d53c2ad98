/**
 * Rate limits count callers, not what a request says about itself. The classes guarded here:
 * - header spellings: one credential, however its `Authorization` header is written, is one bucket;
 * - many credentials: every session and API token of a user counts in the user's one bucket;
 * - made-up credentials: a request whose credential does not resolve counts against its address,
 *   is refused once the address is over its limit, and leaves no counter of its own;
 * - addresses: IPv6 counts by /64 and IPv4-mapped IPv6 as the IPv4 address; with TRUST_PROXY = n
 *   the address is the one the n-th proxy from the right saw, without it X-Forwarded-For is ignored.
 * Each test runs a server of its own (startExtraServer); counters are in PostgreSQL when the run has
 * a server, emptied before each test, and in memory (per server) with the embedded database.
 */
import { expect } from 'chai';
import type { Context } from 'koa';
import { randomToken } from '../../tools/src/conformance/case.js';
import { addressBucket, clientAddress } from '../../server/src/http/rate-limit.js';
import type { RunningServer } from '../../server/src/server.js';
import { database, secret, sql, startExtraServer } from '../support/harness.js';
import { signUpOn } from '../support/accounts.js';
import { callAt, http } from '../support/http.js';

const failedLogin = (server: RunningServer, headers: Record<string, string> = {}) =>
  callAt(server.url, 'POST', '/v1/auth/login', undefined, { login: 'nobody', password: 'wrong-password' }, headers);

/** The status of `count` reads of the caller's account with this `Authorization` header (none when undefined). */
async function statuses(server: RunningServer, count: number, authorization?: string | ((i: number) => string)): Promise<number[]> {
  const seen = [];
  for (let i = 0; i < count; i++) {
    const header = typeof authorization === 'function' ? authorization(i) : authorization;
    seen.push(
      (await callAt(server.url, 'GET', '/v1/users/me', undefined, undefined, header === undefined ? {} : { Authorization: header })).status,
    );
  }
  return seen;
}

const times = (status: number, n: number) => new Array<number>(n).fill(status);

/** A user's sessions on `server`, oldest first. */
async function sessionsOf(server: RunningServer, username: string): Promise<{ id: string; ip: string | null }[]> {
  const text = 'select s.id, s.ip from sessions s join users u on u.id = s.user_id where u.username = ? order by s.created_at, s.id';
  return sql(text, [username], server.db);
}

/**
 * The counters' keys in PostgreSQL once they hold `expected` (each instance adds its counts up there
 * within a second), or as they are after 3 s; undefined with the embedded database, whose counters
 * are in memory.
 */
async function counterKeys(expected: string[]): Promise<string[] | undefined> {
  if (database().kind !== 'postgresql') return undefined;
  const deadline = Date.now() + 3000;
  for (;;) {
    const keys = (await sql<{ key: string }>('select key from rate_limits order by key')).map((r) => r.key);
    if (keys.join() === [...expected].sort().join() || Date.now() > deadline) return keys;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('rate limits', function () {
  this.timeout(120_000);
  let server: RunningServer | undefined;

  async function start(env: Record<string, string>): Promise<RunningServer> {
    server = await startExtraServer(env);
    return server;
  }

  beforeEach(async () => {
    if (database().kind === 'postgresql') await sql('delete from rate_limits');
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  after(async () => {
    if (database().kind === 'postgresql') await sql('delete from rate_limits');
  });

  it('allows sign-up and login AUTH_RATE_LIMIT times a minute per address, then answers 429 with Retry-After', async () => {
    const limited = await start({ AUTH_RATE_LIMIT: '3', API_RATE_LIMIT: '5' });
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const answer = await failedLogin(limited);
      expect(answer.status).to.equal(401);
      expect(answer.headers.get('ratelimit-limit')).to.equal('3');
      remaining.push(answer.headers.get('ratelimit-remaining'));
    }
    expect(remaining).to.deep.equal(['2', '1', '0']);
    const refused = await failedLogin(limited);
    expect(refused.status).to.equal(429);
    expect(refused.json).to.deep.equal({ success: false, error: { code: 'rate_limited', message: refused.json.error.message } });
    expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 60);
    expect(refused.headers.get('ratelimit-remaining')).to.equal('0');
  });

  // Class: header spellings. The bucket is the credential, not the header's text: no spelling has an allowance of its own.
  it('counts one token written 24 ways as one caller', async () => {
    const limited = await start({ API_RATE_LIMIT: '5' });
    const { token } = await signUpOn(limited);
    const schemes = ['Bearer', 'bearer', 'BEARER', 'BeArEr', 'Token', 'token', 'TOKEN', 'tOkEn'];
    const spellings = schemes.flatMap((scheme) => [1, 2, 3].map((spaces) => `${scheme}${' '.repeat(spaces)}${token}`));
    expect(new Set(spellings).size).to.equal(24);
    expect(await statuses(limited, 24, (i) => spellings[i]!)).to.deep.equal([...times(200, 5), ...times(429, 19)]);
  });

  // Class: made-up credentials. A token that resolves to no one counts against its address, with no bucket (or row) of its own.
  it('counts made-up tokens against their address: 429 once it is spent, and no counter per token', async () => {
    const limited = await start({ API_RATE_LIMIT: '5' });
    const made = Array.from({ length: 50 }, () => `Bearer ${randomToken()}`);
    expect(await statuses(limited, 50, (i) => made[i]!)).to.deep.equal([...times(401, 5), ...times(429, 45)]);
    // Malformed headers and none at all are the same address, as spent.
    expect(await statuses(limited, 2, 'Basic dXNlcjpwYXNz')).to.deep.equal([429, 429]);
    expect(await statuses(limited, 1)).to.deep.equal([429]);
    const keys = await counterKeys(['api:ip:127.0.0.1']);
    if (keys) expect(keys).to.deep.equal(['api:ip:127.0.0.1']);
  });

  // Class: many credentials. A second login or a fiftieth API token buys no more requests: every credential of a user counts in the user's bucket.
  it("counts every credential of a user in the user's one bucket, never against the address; another user keeps its own", async () => {
    const limited = await start({ API_RATE_LIMIT: '6' });
    const user = await signUpOn(limited);
    const second = await callAt(limited.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password: user.password });
    expect(second.status).to.equal(201);
    const secondSession = secret(second.json.data.token as string);
    const created = await callAt(limited.url, 'POST', '/v1/auth/tokens', secondSession, { name: 'rl' }); // the user's first point
    expect(created.status).to.equal(201);
    const apiToken = secret(created.json.data.token as string);

    // The address is spent first: the user still has its own allowance.
    expect(await statuses(limited, 7)).to.deep.equal([...times(401, 6), 429]);
    // Five points left, spent through three credentials; then each of them is refused.
    expect(await statuses(limited, 2, `Bearer ${user.token}`)).to.deep.equal([200, 200]);
    expect(await statuses(limited, 2, `Token ${apiToken}`)).to.deep.equal([200, 200]);
    expect(await statuses(limited, 2, `Bearer ${secondSession}`)).to.deep.equal([200, 429]);
    expect(await statuses(limited, 1, `Bearer ${user.token}`)).to.deep.equal([429]);
    expect(await statuses(limited, 1, `Token ${apiToken}`)).to.deep.equal([429]);
    // A new session of the spent user is refused too; another user is not.
    const third = await callAt(limited.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password: user.password });
    expect(await statuses(limited, 1, `Bearer ${secret(third.json.data.token as string)}`)).to.deep.equal([429]);
    const other = await signUpOn(limited);
    expect(await statuses(limited, 1, `Bearer ${other.token}`)).to.deep.equal([200]);
    const expected = ['api:ip:127.0.0.1', `api:user:${user.id}`, `api:user:${other.id}`].sort();
    const keys = await counterKeys(expected);
    if (keys) expect(keys).to.deep.equal(expected);
  });

  it('never limits health checks', async () => {
    const limited = await start({ API_RATE_LIMIT: '1' });
    for (let i = 0; i < 4; i++) expect((await callAt(limited.url, 'GET', '/healthz')).status).to.equal(200);
  });

  it('is off when the limit is 0 (the suite’s own server): no RateLimit headers', async () => {
    const answer = await http('GET', '/v1');
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('ratelimit-limit')).to.equal(null);
  });

  describe('the client address', () => {
    // Class: addresses. Without a trusted proxy, X-Forwarded-For is the client's to write.
    it('ignores X-Forwarded-For when TRUST_PROXY is not set', async () => {
      const direct = await start({ AUTH_RATE_LIMIT: '1', TRUST_PROXY: '' });
      expect((await failedLogin(direct, { 'X-Forwarded-For': '198.51.100.1' })).status).to.equal(401);
      expect((await failedLogin(direct, { 'X-Forwarded-For': '198.51.100.2' })).status).to.equal(429);
      expect((await failedLogin(direct)).status).to.equal(429);
    });

    it('with TRUST_PROXY=1 takes the right-most X-Forwarded-For entry, whatever the client put before it', async () => {
      const proxied = await start({ AUTH_RATE_LIMIT: '1', TRUST_PROXY: '1' });
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '203.0.113.1, 198.51.100.1' })).status).to.equal(401);
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '203.0.113.2, 198.51.100.1' })).status).to.equal(429);
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '198.51.100.1' })).status).to.equal(429);
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '198.51.100.1, 198.51.100.2' })).status).to.equal(401);
    });

    it('with TRUST_PROXY=2 takes the entry the first proxy added, not the second proxy’s own', async () => {
      const proxied = await start({ AUTH_RATE_LIMIT: '1', TRUST_PROXY: '2' });
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '203.0.113.1, 198.51.100.1, 10.0.0.1' })).status).to.equal(401);
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '203.0.113.9, 198.51.100.1, 10.0.0.2' })).status).to.equal(429);
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '198.51.100.3, 10.0.0.1' })).status).to.equal(401);
    });

    it('counts IPv6 clients by /64 and IPv4-mapped IPv6 as IPv4, end to end through a trusted proxy', async () => {
      const proxied = await start({ AUTH_RATE_LIMIT: '1', TRUST_PROXY: '1' });
      const from = (address: string) => failedLogin(proxied, { 'X-Forwarded-For': address });
      expect((await from('2001:db8:1:2::1')).status).to.equal(401);
      expect((await from('2001:db8:1:2:ffff:ffff:ffff:ffff')).status).to.equal(429);
      expect((await from('2001:db8:1:3::1')).status).to.equal(401);
      expect((await from('198.51.100.5')).status).to.equal(401);
      expect((await from('::ffff:198.51.100.5')).status).to.equal(429);
    });

    it('stores and counts only an address: anything else a proxy forwards falls back to the peer', async () => {
      const proxied = await start({ AUTH_RATE_LIMIT: '3', TRUST_PROXY: '1' });
      const user = await signUpOn(proxied);
      const credentials = { login: user.username, password: user.password };
      const login = await callAt(proxied.url, 'POST', '/v1/auth/login', undefined, credentials, { 'X-Forwarded-For': 'not-an-address' });
      expect(login.status).to.equal(201);
      secret(login.json.data.token as string);
      expect((await sessionsOf(proxied, user.username)).map((s) => s.ip)).to.deep.equal(['127.0.0.1', '127.0.0.1']);
      // Sign-up and login took two of the three: the third is the peer's, and so is the next.
      expect((await failedLogin(proxied, { 'X-Forwarded-For': 'junk' })).status).to.equal(401);
      expect((await failedLogin(proxied, { 'X-Forwarded-For': '127.0.0.1' })).status).to.equal(429);
    });

    it('groups addresses into buckets: IPv4 as is, IPv4-mapped as IPv4, IPv6 by /64', () => {
      expect(addressBucket('192.0.2.1')).to.equal('192.0.2.1');
      expect(addressBucket('::ffff:192.0.2.1')).to.equal('192.0.2.1');
      expect(addressBucket('::ffff:c000:201')).to.equal('192.0.2.1');
      expect(addressBucket('2001:db8:1:2::1')).to.equal('2001:db8:1:2::/64');
      expect(addressBucket('2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd')).to.equal('2001:db8:1:2::/64');
      expect(addressBucket('2001:db8::')).to.equal('2001:db8:0:0::/64');
      expect(addressBucket('2001:db8:1:3::1')).to.equal('2001:db8:1:3::/64');
      expect(addressBucket('::1')).to.equal('0:0:0:0::/64');
      expect(addressBucket('fe80::1%eth0')).to.equal('fe80:0:0:0::/64');
      expect(addressBucket('1:2:3:4:5:6:7:8')).to.equal('1:2:3:4::/64');
      expect(addressBucket('64:ff9b::198.51.100.1')).to.equal('64:ff9b:0:0::/64');
      expect(addressBucket('')).to.equal('unknown');
    });

    it('reads a forwarded address with a port, and falls back to the peer for anything that is not an address', () => {
      const ctx = (ip: string) => ({ ip, socket: { remoteAddress: '10.1.2.3' } }) as unknown as Context;
      expect(clientAddress(ctx('198.51.100.7'))).to.equal('198.51.100.7');
      expect(clientAddress(ctx('198.51.100.7:8080'))).to.equal('198.51.100.7');
      expect(clientAddress(ctx('[2001:db8::1]:443'))).to.equal('2001:db8::1');
      expect(clientAddress(ctx('2001:db8::1'))).to.equal('2001:db8::1');
      expect(clientAddress(ctx('junk'))).to.equal('10.1.2.3');
      expect(clientAddress(ctx(''))).to.equal('10.1.2.3');
    });
  });
});
