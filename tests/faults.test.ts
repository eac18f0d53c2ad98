/**
 * Faults: the database goes away under a running service, and the service is stopped under load.
 *
 * 1. Outage: a PostgreSQL cluster of our own (tests/support/pg-cluster.ts) is stopped (`pg_ctl stop
 *    -m fast`) while the service runs on it. Meanwhile every request that needs the database must
 *    answer 503 `unavailable` within 5 s (the longest is printed), /readyz 503, /healthz and GET /v1
 *    200; when the cluster is back the service serves again without a restart (the time to recover
 *    is printed), and everything committed before the stop is still there.
 * 2. Graceful shutdown: `server/src/main.ts` as its own process gets SIGTERM while slow sign-ups
 *    (bcrypt) are in flight: they complete with 201, new connections are refused, the process exits 0.
 *
 * Skipped, with the reason printed, only when the machine has no initdb.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import pg from 'pg';
import { pino } from 'pino';
import { loadConfig } from '../server/src/config.js';
import { createInviteCode } from '../server/src/domain/invite-codes.js';
import { startServer, type RunningServer } from '../server/src/server.js';
import { outputDir, secret } from './support/harness.js';
import { createCluster, findPostgresBinaries, type PgCluster } from './support/pg-cluster.js';

interface Answer {
  status: number;
  json: any;
  ms: number;
}

async function call(base: string, method: string, urlPath: string, token?: string, body?: unknown): Promise<Answer> {
  const started = performance.now();
  const response = await fetch(base + urlPath, {
    method,
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined, ms: performance.now() - started };
}

describe('faults: the database goes down and comes back', function () {
  this.timeout(300_000);
  let cluster: PgCluster | undefined;
  let server: RunningServer | undefined;
  let dataDir: string | undefined;
  let base = '';
  let token = '';
  let namespace = '';
  const insightIds: string[] = [];
  const eventIds: string[] = [];

  before(async function () {
    const { bin, reason } = findPostgresBinaries();
    if (!bin) {
      console.log(`      skipped: ${reason}`);
      this.skip();
    }
    cluster = await createCluster(bin!);
    await cluster.psql('create database signalboard');
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-faults-'));
    const config = {
      ...loadConfig({ ...process.env, DATABASE_URL: cluster.url('signalboard'), AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '0', BCRYPT_ROUNDS: '4', STRIPE_SECRET_KEY: '' }),
      port: 0,
      host: '127.0.0.1',
      dataDir,
    };
    // Into the run's log, which the end-of-run check searches for leaked secrets.
    const logger = pino({ level: 'info' }, pino.destination({ dest: path.join(outputDir, 'server.log'), sync: true }));
    server = await startServer(config, logger);
    base = server.url;
    console.log(`      own cluster: ${await cluster.psql('show server_version')}`.trim() + ` on port ${cluster.port}`);
  });

  after(async () => {
    await server?.close().catch(() => {});
    await cluster?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('commits data, answers 503 unavailable within 5 s while the database is down, and serves again when it is back', async () => {
    // Data committed before the outage.
    const { code } = await createInviteCode(server!.db.orm.em.fork(), { uses: 5 });
    secret(code);
    const signup = await call(base, 'POST', '/v1/auth/signup', undefined, { username: 'faulty', email: 'faulty@example.com', password: secret('faulty-password'), invite: code });
    expect(signup.status, JSON.stringify(signup.json)).to.equal(201);
    token = secret(signup.json.data.token as string);
    namespace = 'outage-proof';
    expect((await call(base, 'POST', '/v1/projects', token, { namespace, name: 'Outage proof' })).status).to.equal(201);
    for (let i = 0; i < 20; i++) {
      const insight = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: `figure ${i}`, value: i });
      expect(insight.status).to.equal(201);
      insightIds.push(insight.json.data.id);
      const event = await call(base, 'POST', `/v1/projects/${namespace}/feeds/general/events`, token, { event: `event ${i}`, tags: { i } });
      expect(event.status).to.equal(201);
      eventIds.push(event.json.data.id);
    }

    // The outage.
    const stopStarted = performance.now();
    await cluster!.stop('fast');
    console.log(`      pg_ctl stop -m fast: ${Math.round(performance.now() - stopStarted)} ms`);

    const needsDatabase: [string, string, unknown?][] = [
      ['GET', '/v1/users/me'],
      ['GET', `/v1/projects/${namespace}`],
      ['GET', `/v1/projects/${namespace}/insights`],
      ['GET', `/v1/projects/${namespace}/events`],
      ['POST', `/v1/projects/${namespace}/insights`, { title: 'during the outage', value: 1 }],
      ['POST', '/v1/auth/login', { login: 'faulty', password: 'faulty-password' }],
      ['GET', '/readyz'],
    ];
    let longest = 0;
    let longestRequest = '';
    const seen: string[] = [];
    const outageStarted = performance.now();
    // Three rounds, one after another and then all at once, over a few seconds of outage.
    for (let round = 0; round < 3; round++) {
      const answers = round === 2
        ? await Promise.all(needsDatabase.flatMap((r) => [r, r]).map(([method, p, body]) => call(base, method, p, p.startsWith('/v1/auth/login') ? undefined : token, body).then((a) => ({ method, p, a }))))
        : await (async () => {
          const out = [];
          for (const [method, p, body] of needsDatabase) out.push({ method, p, a: await call(base, method, p, p.startsWith('/v1/auth/login') ? undefined : token, body) });
          return out;
        })();
      for (const { method, p, a } of answers) {
        seen.push(`${method} ${p} ${a.status}`);
        if (a.ms > longest) [longest, longestRequest] = [a.ms, `${method} ${p}`];
        expect(a.status, `${method} ${p} while the database is down: ${JSON.stringify(a.json)}`).to.equal(503);
        expect(a.json, `${method} ${p}`).to.deep.include({ success: false });
        expect(a.json.error.code, `${method} ${p}`).to.equal('unavailable');
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    // What needs no database still answers.
    expect((await call(base, 'GET', '/healthz')).status).to.equal(200);
    expect((await call(base, 'GET', '/v1')).status).to.equal(200);
    console.log(`      outage: ${seen.length} requests over ${Math.round(performance.now() - outageStarted)} ms, all 503 unavailable; longest ${Math.round(longest)} ms (${longestRequest})`);
    expect(longest, `the longest answer while the database was down (${longestRequest})`).to.be.below(5_000);

    // The database comes back; the service recovers by itself.
    const startStarted = performance.now();
    await cluster!.start();
    const backAt = performance.now();
    console.log(`      pg_ctl start: ${Math.round(backAt - startStarted)} ms`);
    let recovered: number | undefined;
    let attempts = 0;
    while (performance.now() - backAt < 60_000) {
      attempts += 1;
      const [ready, me] = await Promise.all([call(base, 'GET', '/readyz'), call(base, 'GET', '/v1/users/me', token)]);
      if (ready.status === 200 && me.status === 200) {
        recovered = performance.now() - backAt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(recovered, 'the service serves again within 60 s of the database being back').to.not.equal(undefined);
    console.log(`      recovery: serving again ${Math.round(recovered!)} ms after the database was back (${attempts} polls), no restart`);

    // Nothing committed before the stop is lost, and writes work again.
    const insights = await call(base, 'GET', `/v1/projects/${namespace}/insights?limit=100`, token);
    expect(insights.status).to.equal(200);
    expect((insights.json.data.items as { id: string }[]).map((i) => i.id)).to.include.members(insightIds);
    const events = await call(base, 'GET', `/v1/projects/${namespace}/events?limit=100`, token);
    expect(events.status).to.equal(200);
    expect((events.json.data.items as { id: string }[]).map((e) => e.id)).to.include.members(eventIds);
    const direct = new pg.Client({ connectionString: cluster!.url('signalboard') });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ n: number }>('select count(*)::int as n from insights where id = any($1::uuid[])', [insightIds]);
      expect(rows[0]!.n).to.equal(insightIds.length);
      // The write refused during the outage did not half-happen.
      const during = await direct.query<{ n: number }>(`select count(*)::int as n from insights where title = 'during the outage'`);
      expect(during.rows[0]!.n).to.equal(0);
    } finally {
      await direct.end();
    }
    const after = await call(base, 'POST', `/v1/projects/${namespace}/insights`, token, { title: 'after the outage', value: 2 });
    expect(after.status).to.equal(201);
  });
});

describe('faults: SIGTERM drains in-flight requests', function () {
  this.timeout(180_000);
  const root = path.resolve('.');
  let child: ChildProcess | undefined;
  let dataDir = '';

  after(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('finishes the requests in flight, refuses new connections, closes and exits 0', async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-drain-'));
    const { DATABASE_URL: _unused, ...inherited } = process.env;
    // Slow sign-ups: bcrypt at 11 rounds takes a few hundred milliseconds each, one after another.
    const env = { ...inherited, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', AUTH_RATE_LIMIT: '0', API_RATE_LIMIT: '0', BCRYPT_ROUNDS: '11' };
    child = spawn(process.execPath, ['--import', 'tsx', 'server/src/main.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const log: { msg?: string; url?: string; [key: string]: unknown }[] = [];
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    // Standard error is read (a full pipe would block the service) and kept for the failure message.
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the service did not start within 90 s; stderr: ${stderr}`)), 90_000);
      child!.once('exit', (code) => reject(new Error(`the service exited with ${code} before listening; stderr: ${stderr}`)));
      createInterface({ input: child!.stdout! }).on('line', (line) => {
        let entry;
        try {
          entry = JSON.parse(line);
        } catch {
          return;
        }
        log.push(entry);
        if (entry.msg === 'listening') {
          clearTimeout(timer);
          resolve(entry.url);
        }
      });
    });

    // An invite code for the sign-ups, through the operator command (the service owns the data folder).
    const created = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', 'scripts/invite.ts', 'create', '--uses', '10'], { cwd: root, env, timeout: 90_000 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(stdout.trim().split('\n').pop()!.trim());
      });
    });
    const code = secret(created);

    const inFlight = Array.from({ length: 3 }, (_, i) => {
      const started = performance.now();
      return fetch(`${url}/v1/auth/signup`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ username: `drain_${i}`, email: `drain_${i}@example.com`, password: secret(`drain-password-${i}`), invite: code }),
      }).then(async (response) => {
        const body = (await response.json()) as { data?: { token?: string } };
        if (body.data?.token) secret(body.data.token);
        return { status: response.status, ms: performance.now() - started, done: performance.now() };
      });
    });
    // Let the requests reach the service (the first bcrypt round is under way), then stop it.
    await new Promise((resolve) => setTimeout(resolve, 150));
    const signalled = performance.now();
    child.kill('SIGTERM');

    // New connections must be refused from the signal on, while the old ones are still served:
    // probe with a new connection every 50 ms until one is refused.
    let pending = true;
    const allDone = Promise.all(inFlight).finally(() => (pending = false));
    const probes: { at: number; outcome: string }[] = [];
    // From the moment the service says it is shutting down (its signal handler ran; bcrypt may delay that).
    while (!log.some((e) => e.msg === 'shutting down') && performance.now() - signalled < 10_000) await new Promise((resolve) => setTimeout(resolve, 5));
    const acknowledged = Math.round(performance.now() - signalled);
    for (;;) {
      const at = performance.now() - signalled;
      const outcome = await fetch(`${url}/v1`, { headers: { Connection: 'close' }, signal: AbortSignal.timeout(5_000) }).then(
        (response) => `answered ${response.status}`,
        (error: Error) => String((error.cause as { code?: string } | undefined)?.code ?? error.message),
      );
      probes.push({ at: Math.round(at), outcome });
      if (outcome !== 'answered 200' || probes.length >= 200) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const refused = probes[0]!.outcome;
    const firstRefusal = probes.find((p) => p.outcome !== 'answered 200');
    const stillPendingAtRefusal = pending;
    const finished = await allDone;
    const code0 = await exited;
    const exitMs = performance.now() - signalled;

    console.log(`      in flight at SIGTERM: ${finished.length} sign-ups, answered ${finished.map((f) => f.status).join(', ')} after ${finished.map((f) => Math.round(f.done - signalled)).join(', ')} ms`);
    console.log(`      'shutting down' logged ${acknowledged} ms after SIGTERM; new connections after that: ${probes.length - (firstRefusal ? 1 : 0)} accepted, first refused at ${firstRefusal ? `${firstRefusal.at} ms (${firstRefusal.outcome}${stillPendingAtRefusal ? ', sign-ups still in flight' : ', after the sign-ups were done'})` : 'never'}; exit ${code0} ${Math.round(exitMs)} ms after SIGTERM`);
    expect(finished.map((f) => f.status), 'the in-flight sign-ups complete normally').to.deep.equal([201, 201, 201]);
    expect(finished.some((f) => f.done - signalled > 50), 'some sign-up was still in flight at SIGTERM').to.equal(true);
    // Refused: the listener is closed (ECONNREFUSED), or the connection was still in the kernel's
    // backlog when it closed and is reset; never served.
    expect(refused, `a new connection once the service said it is shutting down (probes: ${JSON.stringify(probes)})`).to.be.oneOf(['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET']);
    expect(code0, 'exit code').to.equal(0);
    expect(log.some((e) => e.msg === 'shutting down' && e.signal === 'SIGTERM'), 'the log says it is shutting down').to.equal(true);
  });
});
