/**
 * What one request may make the database do, on the run's database and on an embedded one of its
 * own: a range of counts too long for its buckets is refused before any statement, an answer of
 * more counts than MAX_COUNTS is refused, repeated tag filters count once, and a cheap request
 * beside six of the worst stays fast. On the embedded database, where PGlite has no
 * `statement_timeout` of its own, a statement past the bound is ended (57014, a 503 for a request)
 * while `/healthz` keeps answering, and the service goes on with its data whole.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { baseUrl, database, sql, startServerIn, type TestServer } from '../support/harness.js';
import { signUpOn, type Server } from '../support/accounts.js';
import { callAt, expectData, expectInvalid } from '../support/http.js';
import { statementsDuring } from '../support/statements.js';
import { namespaceName, projectPath } from '../support/projects.js';
import { MAX_COUNTS } from '../../server/src/domain/event-counts.js';

const WORST = { interval: 'minute', from: '0001-01-01T00:00:00Z', to: '9999-12-31T23:59:59Z' };

const countsPath = (namespace: string, query: Record<string, string>) =>
  projectPath(namespace, `/events/counts?${new URLSearchParams(query).toString()}`);

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/** An embedded server in a folder of its own, whatever database the run uses. */
function startEmbedded(env: Record<string, string> = {}): Promise<TestServer> {
  return startServerIn(
    'signalboard-bounds',
    { ...process.env, DATABASE_URL: '', AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '0', BCRYPT_ROUNDS: '4', ...env },
    pino({ level: 'silent' }),
  );
}

function boundsOn(label: string, server: () => Server) {
  describe(`on ${label}`, () => {
    let token: string;
    let namespace: string;
    const ask = (path: string, method = 'GET', body?: unknown) => callAt(server().url, method, path, token, body);
    before(async () => {
      token = (await signUpOn(server())).token;
      namespace = namespaceName('bounds');
      expectData(await ask('/v1/projects', 'POST', { name: 'Bounds', namespace }), 201);
    });

    it('refuses the widest range of minutes with 400 before any statement, and a cheap request beside six of them stays fast', async () => {
      let answers: Awaited<ReturnType<typeof ask>>[] = [];
      const statements = await statementsDuring(async () => {
        answers = await Promise.all(Array.from({ length: 6 }, () => ask(countsPath(namespace, WORST))));
      });
      for (const answer of answers) expectInvalid(answer, '/query/from');
      expect(statements.filter((text) => text.includes('generate_series'))).to.deep.equal([]);

      const worst = Array.from({ length: 6 }, () => timed(() => ask(countsPath(namespace, WORST))));
      const cheap = await timed(() => ask(projectPath(namespace)));
      expect(cheap.value.status).to.equal(200);
      const slowest = Math.max(...(await Promise.all(worst)).map((answer) => answer.ms));
      console.log(
        `      six of the worst: 400, the slowest in ${slowest.toFixed(0)} ms; the project beside them: ${cheap.ms.toFixed(0)} ms`,
      );
      // Before the bound, the cheap request waited behind the worst ones for seconds (PostgreSQL's
      // statement timeout, 5 s) or minutes (the embedded database, which had none).
      expect(cheap.ms).to.be.below(2_000);
      for (const answer of await Promise.all(worst)) expectInvalid(answer.value, '/query/from');
    });

    it('refuses more counts than an answer holds with 400, and answers the same range for one feed', async () => {
      const feeds = Math.ceil(MAX_COUNTS / 1441);
      for (let i = 1; i < feeds; i++) expectData(await ask(projectPath(namespace, '/feeds'), 'POST', { name: `feed-${i}` }), 201);
      const day = { interval: 'minute', from: '2026-03-01T00:00:00Z', to: '2026-03-02T00:00:00Z' };
      expectInvalid(await ask(countsPath(namespace, { ...day, group_by: 'feed' })), '/query/group_by');
      const one = expectData(await ask(countsPath(namespace, { ...day, group_by: 'feed', feed: 'feed-1' })));
      expect(one.series).to.have.length(1);
      expect(one.series[0].buckets).to.have.length(1441);
      const together = expectData(await ask(countsPath(namespace, day)));
      expect(together.series[0].buckets).to.have.length(1441);
    });

    it('counts twenty identical tag filters as one', async () => {
      const publish = (tags: Record<string, string>) =>
        ask(projectPath(namespace, '/feeds/general/events'), 'POST', { event: 'tagged', tags });
      expectData(await publish({ plan: 'pro' }), 201);
      expectData(await publish({ plan: 'free' }), 201);
      const query = Array.from({ length: 20 }, () => 'tag=plan%3Apro').join('&');
      let page: { items: { tags: unknown }[] } = { items: [] };
      const statements = await statementsDuring(async () => {
        page = expectData(await ask(projectPath(namespace, `/events?${query}`)));
      });
      expect(page.items.map((item) => item.tags)).to.deep.equal([{ plan: 'pro' }]);
      const listing = statements.filter((text) => text.includes('from events e join feeds f'));
      expect(listing).to.have.length(1);
      expect(listing[0]!.match(/tags @> any/g)).to.have.length(1);
    });
  });
}

describe('what one query may cost', function () {
  this.timeout(120_000);
  let embedded: TestServer;
  before(async () => {
    embedded = await startEmbedded({ DB_STATEMENT_TIMEOUT_MS: '1000' });
  });
  after(async () => {
    await embedded?.close();
  });

  boundsOn('the run’s database', () => ({ url: baseUrl(), db: database() }));
  boundsOn('an embedded database', () => embedded);

  describe('a statement past the bound on the embedded database', () => {
    it('is ended with 57014 while /healthz answers, and the service goes on with its data', async () => {
      const user = await signUpOn(embedded);
      const running = timed(() =>
        sql('select count(*) from generate_series(1, 10000000000)', [], embedded.db).then(
          () => 'finished',
          (error: { code?: string }) => error.code,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const health = await timed(() => fetch(`${embedded.url}/healthz`));
      expect(health.value.status).to.equal(200);
      expect(health.ms).to.be.below(500);
      const ended = await running;
      expect(ended.value).to.equal('57014');
      expect(ended.ms).to.be.below(5_000);

      // PGlite starts again on the folder (a second or so, during which requests wait or answer 503):
      // the account made before is there, and the service works.
      let me = await callAt(embedded.url, 'GET', '/v1/users/me', user.token);
      for (let tries = 0; me.status === 503 && tries < 20; tries++) me = await callAt(embedded.url, 'GET', '/v1/users/me', user.token);
      expect(expectData(me).username).to.equal(user.username);
      expect((await signUpOn(embedded)).token).to.be.a('string');
    });

    it('bounds the temporary files one statement may write', async () => {
      const [row] = await sql<{ temp_file_limit: string }>('show temp_file_limit', [], embedded.db);
      expect(row!.temp_file_limit).to.equal('256MB');
    });
  });
});
