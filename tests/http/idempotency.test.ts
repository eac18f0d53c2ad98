/**
 * Idempotent writes (server/src/http/idempotency.ts, server/src/domain/idempotency.ts): a write
 * sent again with its `Idempotency-Key` answers the first answer again, same status and body, with
 * `Idempotent-Replayed: true`, and is done once (counted in the database); the key on another
 * request is 422, while its first request runs 409; keys are per user, shared by a user's
 * credentials and by every instance, live 24 hours and are then pruned; recorded refusals replay,
 * failures give the key back; a bad key is 400; a request without one is untouched. And the
 * service refuses a contract that declares a key where it could not honour one.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { loadConfig } from '../../server/src/config.js';
import { DatabaseIconRows } from '../../server/src/domain/icons.js';
import { Contract, contractDocument } from '../../server/src/http/contract.js';
import { Maintenance, MAINTENANCE_DEFAULTS } from '../../server/src/maintenance/prune.js';
import { IconStore } from '../../server/src/storage/icons.js';
import { apiToken, inviteCode, signUp, uniqueName, type TestUser } from '../support/accounts.js';
import { count, database, secret, sql, startExtraServer } from '../support/harness.js';
import { call, callAt, expectData, expectError, expectInvalid, http, tally, type Answer } from '../support/http.js';
import { createInsight, createProject, projectPath } from '../support/projects.js';
import { statementsDuring } from '../support/statements.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const HOUR_MS = 3_600_000;

function keyed(key: string): Record<string, string> {
  return { 'Idempotency-Key': key };
}

function eventsPath(namespace: string, feed = 'general'): string {
  return projectPath(namespace, `/feeds/${feed}/events`);
}

async function eventCount(projectId: string): Promise<number> {
  return count('select count(*)::int as n from events where project_id = ?', [projectId]);
}

/** The key's row as stored, or undefined. */
async function keyRow(user: TestUser, key: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await sql('select status, body, claim, lease_until from idempotency_keys where user_id = ? and key = ?', [user.id, key]);
  return row;
}

/** Moves the user's keys `ms` into the past, as if they had been used that long ago. */
async function age(user: TestUser, ms: number): Promise<void> {
  await sql(`update idempotency_keys set created_at = created_at - ?::float8 * interval '1 millisecond' where user_id = ?`, [ms, user.id]);
}

/** A replay: the first answer's status and body, byte for byte, marked as replayed. */
function expectReplayOf(replayed: Answer, first: Answer): void {
  expect(replayed.status, replayed.text).to.equal(first.status);
  expect(replayed.text).to.equal(first.text);
  expect(replayed.headers.get('idempotent-replayed')).to.equal('true');
}

function expectFresh(answer: Answer): void {
  expect(answer.headers.get('idempotent-replayed')).to.equal(null);
}

async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 4_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('idempotency keys', () => {
  let owner: TestUser;
  let project: any;

  beforeEach(async () => {
    owner = await signUp();
    project = await createProject(owner.token);
  });

  describe('a repeated key', () => {
    it('replays a publish: same status and body, Idempotent-Replayed: true, and one event stored', async () => {
      const key = randomUUID();
      const first = await call(
        'POST',
        eventsPath(project.namespace),
        owner.token,
        { event: 'signed up', tags: { plan: 'pro' } },
        keyed(key),
      );
      expectData(first, 201);
      expectFresh(first);
      for (let i = 0; i < 3; i++) {
        expectReplayOf(
          await call('POST', eventsPath(project.namespace), owner.token, { event: 'signed up', tags: { plan: 'pro' } }, keyed(key)),
          first,
        );
      }
      expect(await eventCount(project.id)).to.equal(1);
      expect(await keyRow(owner, key)).to.deep.equal({ status: 201, body: first.text, claim: null, lease_until: null });
    });

    it('applies an increment once, and replays the first answer even after the value changed', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Signups', value: 5 });
      const path = projectPath(project.namespace, `/insights/${insight.id}`);
      const key = randomUUID();
      const first = await call('PATCH', path, owner.token, { increment: 1 }, keyed(key));
      expect(expectData(first).value).to.equal(6);
      expectReplayOf(await call('PATCH', path, owner.token, { increment: 1 }, keyed(key)), first);
      expect(expectData(await call('PATCH', path, owner.token, { increment: 10 })).value).to.equal(16);
      const replayed = await call('PATCH', path, owner.token, { increment: 1 }, keyed(key));
      expectReplayOf(replayed, first);
      expect(replayed.json.data.value).to.equal(6);
      const [row] = await sql<{ value: number }>('select value from insights where id = ?', [insight.id]);
      expect(row!.value).to.equal(16);
    });

    it('replays the creation of a project: one project, one feed, one activity entry', async () => {
      const key = randomUUID();
      const body = { name: 'Once', namespace: `once-${randomUUID().slice(0, 8)}` };
      const first = await call('POST', '/v1/projects', owner.token, body, keyed(key));
      const created = expectData(first, 201);
      expectReplayOf(await call('POST', '/v1/projects', owner.token, body, keyed(key)), first);
      expect(await count('select count(*)::int as n from projects where namespace = ?', [body.namespace])).to.equal(1);
      expect(await count('select count(*)::int as n from feeds where project_id = ?', [created.id])).to.equal(1);
      expect(await count('select count(*)::int as n from activity where project_id = ?', [created.id])).to.equal(1);
    });

    it('takes the same body however it is spelt: key order, white space, escapes and number spelling', async () => {
      const key = randomUUID();
      const send = (body: string) =>
        http('POST', eventsPath(project.namespace), {
          headers: { Authorization: `Bearer ${owner.token}`, 'Content-Type': 'application/json', ...keyed(key) },
          body,
        });
      const first = await send('{"event":"paid","tags":{"amount":10,"plan":"pro"}}');
      expectData(first, 201);
      expectReplayOf(await send(' { "tags" : { "plan" : "\\u0070ro", "amount" : 10.0 } , "event" : "paid" } '), first);
      expect(await eventCount(project.id)).to.equal(1);
    });

    it('is shared by the user’s session and API tokens', async () => {
      const token = await apiToken(owner.token);
      const key = randomUUID();
      const first = await call('POST', eventsPath(project.namespace), token, { event: 'deploy' }, keyed(key));
      expectData(first, 201);
      expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'deploy' }, keyed(key)), first);
      expect(await eventCount(project.id)).to.equal(1);
    });

    it('of another user is another key: each user’s request is done', async () => {
      const other = await signUp();
      const otherProject = await createProject(other.token);
      const key = randomUUID();
      const mine = await call('POST', eventsPath(project.namespace), owner.token, { event: 'a' }, keyed(key));
      expectData(mine, 201);
      // Another request than the first user's under the same key: not 422, the key is the other user's own.
      const theirs = await call('POST', eventsPath(otherProject.namespace), other.token, { event: 'b' }, keyed(key));
      expectData(theirs, 201);
      expectFresh(theirs);
      expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'a' }, keyed(key)), mine);
      expect(await eventCount(project.id)).to.equal(1);
      expect(await eventCount(otherProject.id)).to.equal(1);
    });
  });

  describe('a key on another request', () => {
    it('is 422 idempotency_key_reused for another body, path or method, and nothing is done', async () => {
      const insight = await createInsight(owner.token, project.namespace, { title: 'Revenue', value: 1 });
      const key = randomUUID();
      const first = await call('POST', eventsPath(project.namespace), owner.token, { event: 'first' }, keyed(key));
      expectData(first, 201);
      const others: [string, string, unknown][] = [
        ['POST', eventsPath(project.namespace), { event: 'second' }],
        ['POST', eventsPath(project.namespace), { event: 'first', emoji: '🎉' }],
        ['POST', projectPath(project.namespace, '/events'), { events: [{ feed: 'general', event: 'first' }] }],
        ['PATCH', projectPath(project.namespace, `/insights/${insight.id}`), { increment: 1 }],
        ['POST', projectPath(project.namespace, '/feeds'), { name: 'first' }],
      ];
      for (const [method, path, body] of others) {
        expectError(await call(method, path, owner.token, body, keyed(key)), 422, 'idempotency_key_reused', `${method} ${path}`);
      }
      expect(await eventCount(project.id)).to.equal(1);
      const [row] = await sql<{ value: number }>('select value from insights where id = ?', [insight.id]);
      expect(row!.value).to.equal(1);
      expect(await count('select count(*)::int as n from feeds where project_id = ?', [project.id])).to.equal(1);
      // The key still holds its first answer.
      expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'first' }, keyed(key)), first);
    });
  });

  describe('while the first request runs', () => {
    it('another request with the key is 409 idempotency_in_progress with Retry-After, the same key on another request 422', async () => {
      // A claim as a running request leaves it (the instance running it is presumed alive while its lease runs).
      const key = randomUUID();
      const first = await call('POST', eventsPath(project.namespace), owner.token, { event: 'slow' }, keyed(key));
      await sql(
        `update idempotency_keys set status = null, body = null, claim = ?, lease_until = now() + interval '1 minute' where user_id = ? and key = ?`,
        [randomUUID(), owner.id, key],
      );
      const refused = await call('POST', eventsPath(project.namespace), owner.token, { event: 'slow' }, keyed(key));
      expectError(refused, 409, 'idempotency_in_progress');
      expect(refused.headers.get('retry-after')).to.equal('1');
      expectError(
        await call('POST', eventsPath(project.namespace), owner.token, { event: 'other' }, keyed(key)),
        422,
        'idempotency_key_reused',
      );
      expect(await eventCount(project.id)).to.equal(1);
      expectData(first, 201);
    });

    it('on PostgreSQL, a request held on the project’s lock keeps its key: 409 until it answers, then its answer is replayed', async function () {
      if (database().kind !== 'postgresql') this.skip(); // the embedded database is one session: a held lock would hold every request
      const blocker = new pg.Client({ connectionString: database().orm.config.get('clientUrl') });
      await blocker.connect();
      try {
        await blocker.query('begin');
        await blocker.query('select 1 from projects where id = $1 for update', [project.id]);
        const key = randomUUID();
        const running = call('POST', eventsPath(project.namespace), owner.token, { event: 'held' }, keyed(key));
        await waitFor('the claim', async () => (await keyRow(owner, key)) !== undefined);
        expectError(
          await call('POST', eventsPath(project.namespace), owner.token, { event: 'held' }, keyed(key)),
          409,
          'idempotency_in_progress',
        );
        await blocker.query('commit');
        const first = await running;
        expectData(first, 201);
        expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'held' }, keyed(key)), first);
        expect(await eventCount(project.id)).to.equal(1);
      } finally {
        await blocker.end();
      }
    });

    it('a claim whose lease ran out (its instance died) is taken over by the same request, which does the work', async () => {
      const key = randomUUID();
      expectData(await call('POST', eventsPath(project.namespace), owner.token, { event: 'crash' }, keyed(key)), 201);
      // The instance died after its commit and before recording the answer: the documented window, where the work is done again.
      await sql(
        `update idempotency_keys set status = null, body = null, claim = ?, lease_until = now() - interval '1 second' where user_id = ? and key = ?`,
        [randomUUID(), owner.id, key],
      );
      expectError(
        await call('POST', eventsPath(project.namespace), owner.token, { event: 'other' }, keyed(key)),
        422,
        'idempotency_key_reused',
      );
      const taken = await call('POST', eventsPath(project.namespace), owner.token, { event: 'crash' }, keyed(key));
      expectData(taken, 201);
      expectFresh(taken);
      expect(await eventCount(project.id)).to.equal(2);
      expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'crash' }, keyed(key)), taken);
    });
  });

  describe('what is recorded', () => {
    it('a refusal (4xx) of the handler is final: replayed even once the request would succeed', async () => {
      const key = randomUUID();
      const refused = await call('POST', eventsPath(project.namespace, 'signups'), owner.token, { event: 'new user' }, keyed(key));
      expectError(refused, 404, 'not_found');
      expectData(await call('POST', projectPath(project.namespace, '/feeds'), owner.token, { name: 'signups' }), 201);
      expectReplayOf(await call('POST', eventsPath(project.namespace, 'signups'), owner.token, { event: 'new user' }, keyed(key)), refused);
      expect(await eventCount(project.id)).to.equal(0);
      expect(await keyRow(owner, key)).to.deep.include({ status: 404, body: refused.text });
    });

    it('a failure (5xx) gives the key back: nothing recorded, and a retry does the work', async () => {
      // Inserting this insight fails as a full disk would: 503 unavailable, the transaction rolled back.
      await sql(`create function fail_doomed_insight() returns trigger language plpgsql as $$
        begin
          if new.title = 'doomed' then raise exception 'no space left' using errcode = '53100'; end if;
          return new;
        end $$`);
      await sql('create trigger fail_doomed_insight before insert on insights for each row execute function fail_doomed_insight()');
      const key = randomUUID();
      const path = projectPath(project.namespace, '/insights');
      try {
        expectError(await call('POST', path, owner.token, { title: 'doomed', value: 1 }, keyed(key)), 503, 'unavailable');
        expect(await keyRow(owner, key)).to.equal(undefined);
      } finally {
        await sql('drop trigger fail_doomed_insight on insights');
        await sql('drop function fail_doomed_insight()');
      }
      const retried = await call('POST', path, owner.token, { title: 'doomed', value: 1 }, keyed(key));
      expectData(retried, 201);
      expectFresh(retried);
      expectReplayOf(await call('POST', path, owner.token, { title: 'doomed', value: 1 }, keyed(key)), retried);
      expect(await count('select count(*)::int as n from insights where project_id = ?', [project.id])).to.equal(1);
    });
  });

  describe('a key’s lifetime', () => {
    it('is 24 hours: a key used 23 hours ago replays, one used 25 hours ago is new whatever it was used for', async () => {
      const key = randomUUID();
      const first = await call('POST', eventsPath(project.namespace), owner.token, { event: 'daily' }, keyed(key));
      await age(owner, 23 * HOUR_MS);
      expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'daily' }, keyed(key)), first);
      await age(owner, 2 * HOUR_MS);
      const again = await call('POST', eventsPath(project.namespace), owner.token, { event: 'daily' }, keyed(key));
      expectData(again, 201);
      expectFresh(again);
      await age(owner, 25 * HOUR_MS);
      const other = await call('POST', eventsPath(project.namespace), owner.token, { event: 'another request' }, keyed(key));
      expectData(other, 201);
      expectFresh(other);
      expect(await eventCount(project.id)).to.equal(3);
    });

    it('expired keys are pruned by the background maintenance, in bounded batches, and live ones kept', async () => {
      const keys = Array.from({ length: 5 }, () => randomUUID());
      for (const key of keys) expectData(await call('POST', eventsPath(project.namespace), owner.token, { event: key }, keyed(key)), 201);
      await age(owner, 25 * HOUR_MS);
      const live = randomUUID();
      expectData(await call('POST', eventsPath(project.namespace), owner.token, { event: 'live' }, keyed(live)), 201);
      const db = database();
      const icons = new IconStore(new DatabaseIconRows(() => db.orm.em.fork()), () => 'http://cdn.test');
      const config = { ...loadConfig({ DATABASE_URL: db.kind === 'postgresql' ? db.orm.config.get('clientUrl') : '' }), dataDir: db.kind };
      const silent = pino({ level: 'silent' });
      const maintenance = new Maintenance(db, icons, silent, config, { ...MAINTENANCE_DEFAULTS, keyBatchSize: 2, keyMaxBatches: 2 });
      const userKeys = () => count('select count(*)::int as n from idempotency_keys where user_id = ?', [owner.id]);
      expect((await maintenance.pruneOnce()).idempotencyKeys).to.equal(4);
      expect(await userKeys()).to.equal(2);
      expect((await maintenance.pruneOnce()).idempotencyKeys).to.equal(1);
      expect(await userKeys()).to.equal(1);
      expect(await keyRow(owner, live)).to.not.equal(undefined);
    });
  });

  describe('several at once', () => {
    it('publishes concurrent keyed requests through group commit, each once; the same key concurrently is done once', async () => {
      const keys = Array.from({ length: 20 }, () => randomUUID());
      const answers = await Promise.all(
        keys.map((key, i) => call('POST', eventsPath(project.namespace), owner.token, { event: `burst ${i}` }, keyed(key))),
      );
      expect(tally(answers.map((answer) => answer.status))).to.deep.equal({ 201: 20 });
      const same = randomUUID();
      const racing = await Promise.all(
        Array.from({ length: 10 }, () => call('POST', eventsPath(project.namespace), owner.token, { event: 'once' }, keyed(same))),
      );
      const done = racing.filter((answer) => answer.status === 201);
      for (const answer of done) expect(answer.text).to.equal(done[0]!.text);
      for (const answer of racing.filter((a) => a.status !== 201)) expectError(answer, 409, 'idempotency_in_progress');
      expect(done.filter((answer) => answer.headers.get('idempotent-replayed') === null)).to.have.length(1);
      expect(await eventCount(project.id)).to.equal(21);
    });

    it('on PostgreSQL, instances share keys: a key used on one is replayed by another, and a race across both is done once', async function () {
      if (database().kind !== 'postgresql') this.skip(); // an embedded database has one owning process
      const extra = await startExtraServer(CLOSES_AT_ONCE);
      try {
        const key = randomUUID();
        const first = await call('POST', eventsPath(project.namespace), owner.token, { event: 'here' }, keyed(key));
        expectData(first, 201);
        expectReplayOf(await callAt(extra.url, 'POST', eventsPath(project.namespace), owner.token, { event: 'here' }, keyed(key)), first);
        const raced = randomUUID();
        const origins = Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? extra.url : undefined));
        const racing = await Promise.all(
          origins.map((origin) =>
            origin
              ? callAt(origin, 'POST', eventsPath(project.namespace), owner.token, { event: 'raced' }, keyed(raced))
              : call('POST', eventsPath(project.namespace), owner.token, { event: 'raced' }, keyed(raced)),
          ),
        );
        const fresh = racing.filter((answer) => answer.status === 201 && answer.headers.get('idempotent-replayed') === null);
        expect(fresh).to.have.length(1);
        expect(await eventCount(project.id)).to.equal(2);
      } finally {
        await extra.close();
      }
    });
  });

  describe('the header', () => {
    for (const [what, value] of [
      ['empty', ''],
      ['longer than 255 characters', 'k'.repeat(256)],
      ['with a space', 'two words'],
      ['with a tab', 'tab\there'],
      ['not ASCII', 'clé'],
    ] as const) {
      it(`${what} is 400 invalid_request pointing at the header, and nothing is done`, async () => {
        const answer = await call('POST', eventsPath(project.namespace), owner.token, { event: 'bad key' }, keyed(value));
        expectInvalid(answer, '/headers/idempotency-key');
        expect(await eventCount(project.id)).to.equal(0);
        expect(await count('select count(*)::int as n from idempotency_keys where user_id = ?', [owner.id])).to.equal(0);
      });
    }

    it('takes 255 visible ASCII characters', async () => {
      const key = `${'!~'.repeat(127)}k`;
      const first = await call('POST', eventsPath(project.namespace), owner.token, { event: 'long key' }, keyed(key));
      expectData(first, 201);
      expectReplayOf(await call('POST', eventsPath(project.namespace), owner.token, { event: 'long key' }, keyed(key)), first);
    });

    it('left out, a write is done each time it is sent, and costs no statement on the keys', async () => {
      const statements = await statementsDuring(async () => {
        for (let i = 0; i < 2; i++) {
          const answer = await call('POST', eventsPath(project.namespace), owner.token, { event: 'twice' });
          expectData(answer, 201);
          expectFresh(answer);
        }
      });
      expect(statements.filter((text) => text.includes('idempotency_keys'))).to.deep.equal([]);
      expect(await eventCount(project.id)).to.equal(2);
      expect(await count('select count(*)::int as n from idempotency_keys where user_id = ?', [owner.id])).to.equal(0);
      // Where a key costs them: its claim and its record.
      const keyedStatements = await statementsDuring(async () => {
        expectData(await call('POST', eventsPath(project.namespace), owner.token, { event: 'keyed' }, keyed(randomUUID())), 201);
      });
      expect(keyedStatements.filter((text) => text.includes('idempotency_keys'))).to.have.length(2);
    });

    it('is ignored by API token creation, whose answer holds a token shown once and cannot be given again', async () => {
      const key = randomUUID();
      const first = expectData(await call('POST', '/v1/auth/tokens', owner.token, { name: 'ci' }, keyed(key)), 201);
      const second = await call('POST', '/v1/auth/tokens', owner.token, { name: 'ci' }, keyed(key));
      expect(second.headers.get('idempotent-replayed')).to.equal(null);
      expect(expectData(second, 201).token).to.not.equal(first.token);
      expect(await count('select count(*)::int as n from api_tokens where user_id = ?', [owner.id])).to.equal(2);
      expect(await count('select count(*)::int as n from idempotency_keys where user_id = ?', [owner.id])).to.equal(0);
    });

    it('is ignored by sign-up and login, which take no key', async () => {
      const key = randomUUID();
      const login = { login: owner.username, password: owner.password };
      const signup = (username: string) => ({ username, email: `${username}@example.com`, password: owner.password });
      const names = [uniqueName(), uniqueName()];
      const answers = [
        ...(await Promise.all([0, 1].map(() => call('POST', '/v1/auth/login', undefined, login, keyed(key))))),
        ...(await Promise.all(
          names.map(async (name) =>
            call('POST', '/v1/auth/signup', undefined, { ...signup(name), invite: await inviteCode() }, keyed(key)),
          ),
        )),
      ];
      for (const answer of answers) {
        expectData(answer, 201);
        expectFresh(answer);
        secret(answer.json.data.token as string);
      }
      expect(new Set(answers.map((answer) => answer.json.data.token)).size).to.equal(4);
      expect(await count('select count(*)::int as n from users where username in (?)', [names])).to.equal(2);
      expect(await count('select count(*)::int as n from idempotency_keys where key = ?', [key])).to.equal(0);
    });
  });
});

describe('answers that hold a secret', () => {
  let owner: TestUser;
  let project: any;

  beforeEach(async () => {
    owner = await signUp();
    project = await createProject(owner.token);
  });

  /** Every column of the user's keys, as one text: what idempotency_keys holds for them. */
  async function keysText(user: TestUser): Promise<string> {
    return JSON.stringify(await sql('select * from idempotency_keys where user_id = ?', [user.id]));
  }

  it("replays a webhook endpoint's creation and its secret's rotation without the secret (and the created url), which idempotency_keys never holds", async () => {
    const path = projectPath(project.namespace, '/webhooks');
    const secretPart = `XXXXXXXXXXXXXXXXXXXX${randomUUID().slice(0, 8)}`;
    // Turned off, so nothing is sent to it while the other tests publish.
    const body = { url: `https://hooks.slack.com/services/T0001/B0001/${secretPart}`, format: 'slack', enabled: false };
    const key = randomUUID();
    const first = await call('POST', path, owner.token, body, keyed(key));
    const created = expectData(first, 201);
    expectFresh(first);
    expect(created.secret).to.match(/^whsec_/);
    expect(created.url).to.equal(body.url);
    const { secret: _secret, url: _url, ...shownAgain } = created;
    for (let i = 0; i < 2; i++) {
      const replayed = await call('POST', path, owner.token, body, keyed(key));
      expect(replayed.status, replayed.text).to.equal(201);
      expect(replayed.headers.get('idempotent-replayed')).to.equal('true');
      expect(replayed.json).to.deep.equal({ success: true, data: shownAgain });
    }
    expect(await count('select count(*)::int as n from webhook_endpoints where project_id = ?', [project.id])).to.equal(1);
    expect(await keyRow(owner, key)).to.deep.equal({
      status: 201,
      body: JSON.stringify({ success: true, data: shownAgain }),
      claim: null,
      lease_until: null,
    });

    const rotatePath = projectPath(project.namespace, `/webhooks/${created.id}/secret`);
    const rotateKey = randomUUID();
    const rotated = expectData(await call('POST', rotatePath, owner.token, undefined, keyed(rotateKey)));
    expect(rotated.secret)
      .to.match(/^whsec_/)
      .and.not.equal(created.secret);
    const replayedRotation = await call('POST', rotatePath, owner.token, undefined, keyed(rotateKey));
    expect(replayedRotation.status).to.equal(200);
    expect(replayedRotation.headers.get('idempotent-replayed')).to.equal('true');
    expect(replayedRotation.json).to.deep.equal({ success: true, data: { previous_expires_at: rotated.previous_expires_at } });
    // Rotated once: the replay made no third secret.
    const [stored] = await sql<{ secret: string }>('select secret from webhook_endpoints where id = ?', [created.id]);
    expect(stored!.secret).to.equal(rotated.secret);

    const kept = await keysText(owner);
    for (const shownOnce of [created.secret, rotated.secret, secretPart]) expect(kept).to.not.include(shownOnce);
  });

  it('finds every answer field of a keyed operation that holds a secret marked x-secret in the contract, and optional', () => {
    type Schema = {
      $ref?: string;
      properties?: Record<string, Schema>;
      required?: string[];
      allOf?: Schema[];
      items?: Schema;
      'x-secret'?: boolean;
    };
    const document = contractDocument as unknown as {
      paths: Record<string, Record<string, { operationId: string; parameters?: { $ref?: string }[]; responses: Record<string, any> }>>;
      components: { schemas: Record<string, Schema> };
    };
    const resolve = (schema: Schema): Schema =>
      schema.$ref ? resolve(document.components.schemas[schema.$ref.split('/').pop()!]!) : schema;
    const unmarked: string[] = [];
    const marked: string[] = [];
    const walk = (schema: Schema, where: string, seen: Set<Schema>): void => {
      const resolved = resolve(schema);
      if (seen.has(resolved)) return;
      seen.add(resolved);
      for (const part of resolved.allOf ?? []) walk(part, where, seen);
      if (resolved.items) walk(resolved.items, `${where}[]`, seen);
      for (const [name, property] of Object.entries(resolved.properties ?? {})) {
        const secret = property['x-secret'] === true || resolve(property)['x-secret'] === true;
        if (secret) {
          marked.push(`${where}.${name}`);
          expect(resolved.required ?? [], `${where}.${name} is absent on a replay`).to.not.include(name);
        } else if (/secret|token|password/i.test(name)) unmarked.push(`${where}.${name}`);
        walk(property, `${where}.${name}`, seen);
      }
    };
    for (const methods of Object.values(document.paths)) {
      for (const op of Object.values(methods)) {
        if (!op.parameters?.some((p) => p.$ref === '#/components/parameters/IdempotencyKey')) continue;
        for (const [status, response] of Object.entries(op.responses)) {
          const schema = response.content?.['application/json']?.schema;
          if (status.startsWith('2') && schema) walk(schema, `${op.operationId} ${status}`, new Set());
        }
      }
    }
    expect(unmarked).to.deep.equal([]);
    expect(marked).to.include.members([
      'createWebhook 201.data.secret',
      'createWebhook 201.data.url',
      'rotateWebhookSecret 200.data.secret',
    ]);
  });
});

describe('the service loading its contract', () => {
  it('refuses a contract that declares the key on a route without a credential or with a raw body, which could not honour one', async () => {
    const loads = async (path: string) => {
      const document = structuredClone(contractDocument) as unknown as { paths: Record<string, { post: { parameters?: unknown[] } }> };
      const op = document.paths[path]!.post;
      op.parameters = [...(op.parameters ?? []), { $ref: '#/components/parameters/IdempotencyKey' }];
      return Contract.load(document as never).then(
        () => 'loaded',
        (error: Error) => error.message,
      );
    };
    expect(await loads('/v1/projects')).to.equal('loaded');
    expect(await loads('/v1/auth/signup')).to.equal('signup: Idempotency-Key needs a credential and a parsed body');
    expect(await loads('/v1/billing/webhook')).to.equal('stripeWebhook: Idempotency-Key needs a credential and a parsed body');
  });

  it('refuses a contract that requires an x-secret field, which a replay leaves out', async () => {
    const document = structuredClone(contractDocument) as unknown as { components: { schemas: Record<string, { required: string[] }> } };
    document.components.schemas.RotatedWebhookSecret!.required.push('secret');
    const loaded = await Contract.load(document as never).then(
      () => 'loaded',
      (error: Error) => error.message,
    );
    expect(loaded).to.equal('rotateWebhookSecret: x-secret secret is required, but a replay leaves it out');
  });
});
