/**
 * The embedded database on a disk that fills up, as its own process on a tmpfs of its own (mounted
 * here, so as root; where mounting is not allowed the tests are skipped and say why). PostgreSQL
 * writes its log in 16 MiB segments; when a new one does not fit, PGlite's backend PANICs and never
 * answers again. Guarded: requests then fail at once (503) instead of hanging, `/healthz` fails so a
 * supervisor restarts the process, SIGTERM still ends it, a start on too little space says how much
 * it needs, and the restart once space is back keeps every acknowledged event. Each stage's figures
 * are printed.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { send } from '../support/http.js';
import {
  embeddedServiceEnv,
  operatorInviteCode,
  repositoryRoot,
  startServiceProcess,
  type LogEntry,
  type ServiceProcess,
} from '../support/service-process.js';

const MiB = 1024 * 1024;

function freeMiB(dir: string): number {
  const { bavail, bsize } = statfsSync(dir);
  return Math.round(((bavail * bsize) / MiB) * 10) / 10;
}

/** Starts the service and waits for it to end (a start that is refused): its exit code, its log, how long it took. */
function runToExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; log: LogEntry[]; ms: number }> {
  const started = performance.now();
  const argv = ['--import', 'tsx', 'server/src/main.ts'];
  const child = spawn(process.execPath, argv, { cwd: repositoryRoot, env, stdio: ['ignore', 'pipe', 'ignore'] });
  const log: LogEntry[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => log.push(JSON.parse(line) as LogEntry));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, log, ms: Math.round(performance.now() - started) });
    }),
  );
}

interface Timed {
  status: number;
  ms: number;
  body: any;
  retryAfter: string | null;
}

/** A call with how long it took (a bearer token unless `token` is empty; a JSON body when given). */
async function timed(origin: string, method: string, path: string, token = '', body?: unknown): Promise<Timed> {
  const started = performance.now();
  const answer = await send(
    origin,
    { method, path, ...(token ? { token } : {}), ...(body === undefined ? {} : { json: body }) },
    { timeoutMs: 90_000 },
  );
  return {
    status: answer.status,
    ms: Math.round(performance.now() - started),
    body: answer.json,
    retryAfter: answer.headers.get('retry-after'),
  };
}

const post = (origin: string, path: string, token: string, body: unknown) => timed(origin, 'POST', path, token, body);

/** An event of about 8 KiB that does not compress, so the database's log grows fast. */
function bigEvent(n: number) {
  const tags: Record<string, string> = {};
  for (let i = 0; i < 20; i++) tags[`t${i}`] = randomBytes(150).toString('base64');
  return { event: `filler ${n}`, description: randomBytes(3000).toString('base64'), tags };
}

async function stop(service: ServiceProcess): Promise<{ code: number | null; ms: number }> {
  const started = performance.now();
  service.child.kill('SIGTERM');
  const timer = setTimeout(() => service.child.kill('SIGKILL'), 60_000);
  const code = await service.exited;
  clearTimeout(timer);
  return { code, ms: Math.round(performance.now() - started) };
}

describe('the embedded database on a filling disk', function () {
  this.timeout(600_000);
  let mount = '';
  let service: ServiceProcess | undefined;

  before(function () {
    mount = mkdtempSync(path.join(os.tmpdir(), 'signalboard-disk-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=32m,mode=0700', 'tmpfs', mount], { stdio: 'pipe' });
    } catch (err) {
      rmSync(mount, { recursive: true, force: true });
      mount = '';
      const reason = ((err as { stderr?: Buffer }).stderr?.toString() || (err as Error).message).trim();
      console.log(`      skipped: a small tmpfs cannot be mounted here, so no disk can be filled (${reason})`);
      this.skip();
    }
  });
  after(async () => {
    if (service && service.child.exitCode === null) await stop(service);
    if (!mount) return;
    execFileSync('umount', [mount]);
    rmSync(mount, { recursive: true, force: true });
  });

  it('refuses to start with less free space than it needs, saying how much it found (class: a failed start naming no cause)', async () => {
    const dataDir = path.join(mount, 'data');
    const refused = await runToExit(embeddedServiceEnv(dataDir));
    const fatal = refused.log.find((entry) => entry.msg === 'could not start');
    const why = (fatal?.error as Error).message;
    console.log(`      32 MiB disk, ${freeMiB(mount)} MiB free: exit ${refused.code} after ${refused.ms} ms: ${why}`);
    expect(refused.code).to.equal(1);
    expect(fatal?.error).to.deep.equal({
      type: 'DataDirError',
      message:
        `the embedded database needs at least 64 MiB free to start, and the data folder ${dataDir} has 31 MiB: ` +
        'free some space on its disk, or set DATA_DIR to a folder on a larger one',
    });
  });

  it('no room for a log segment: 503 at once, /healthz 503, SIGTERM exits, restarts with room (class: wedged on a full disk)', async () => {
    execFileSync('mount', ['-o', 'remount,size=160m', mount]);
    const dataDir = path.join(mount, 'data');
    const env = embeddedServiceEnv(dataDir);
    service = await startServiceProcess(env);
    const base = service.url;
    console.log(`      160 MiB disk: started, ${freeMiB(mount)} MiB free`);

    const invite = await operatorInviteCode(env, 1);
    const account = { username: 'disk_ada', email: 'ada@example.com', password: 'disk-pass-1', invite };
    const signup = await post(base, '/v1/auth/signup', '', account);
    expect(signup.status).to.equal(201);
    const token = signup.body.data.token as string;
    expect((await post(base, '/v1/projects', token, { name: 'Disk', namespace: 'disk' })).status).to.equal(201);
    const publish = '/v1/projects/disk/feeds/general/events';

    // Leaves 20 MiB: more than the table needs while the current 16 MiB segment fills, less than a new segment and the table.
    const filler = path.join(mount, 'filler');
    writeFileSync(filler, Buffer.alloc(Math.floor((freeMiB(mount) - 20) * MiB)));
    console.log(`      filler written: ${freeMiB(mount)} MiB free`);

    // Filling: events until one is refused.
    const times: number[] = [];
    let refused: Timed | undefined;
    for (let n = 0; n < 20_000 && !refused; n++) {
      const answer = await post(base, publish, token, bigEvent(n));
      if (answer.status === 201) times.push(answer.ms);
      else refused = answer;
    }
    const acknowledged = times.length;
    times.sort((a, b) => a - b);
    console.log(
      `      filling: ${acknowledged} events acknowledged (201), median ${times[acknowledged >> 1]} ms, ` +
        `slowest ${times.at(-1)} ms; then ${freeMiB(mount)} MiB free`,
    );
    expect(refused, 'no event was refused').to.not.equal(undefined);
    console.log(`      full: the refused event: ${refused!.status} in ${refused!.ms} ms, ${JSON.stringify(refused!.body)}`);
    expect(refused!.status).to.equal(503);
    expect(refused!.body).to.deep.equal({
      success: false,
      error: { code: 'unavailable', message: 'The database could not serve this request now; retry later.' },
    });

    const stuck = {
      status: 503,
      body: { success: false, error: { code: 'unavailable', message: 'The database could not serve this request now; retry later.' } },
      retryAfter: '5',
    };
    const dead = {
      status: 503,
      body: {
        success: false,
        error: { code: 'unavailable', message: 'The embedded database has stopped; the service needs a restart.' },
      },
      retryAfter: null,
    };
    const probe = async (stage: string) => {
      const next = await post(base, publish, token, bigEvent(-1));
      const read = await timed(base, 'GET', '/v1/projects/disk/events?limit=1', token);
      const readyz = await timed(base, 'GET', '/readyz');
      const healthz = await timed(base, 'GET', '/healthz');
      console.log(
        `      ${stage}: publish ${next.status} in ${next.ms} ms, read ${read.status} in ${read.ms} ms, ` +
          `/readyz ${readyz.status} in ${readyz.ms} ms, /healthz ${healthz.status} in ${healthz.ms} ms`,
      );
      for (const answer of [next, read, readyz]) {
        expect({ status: answer.status, body: answer.body, retryAfter: answer.retryAfter }).to.deep.equal(stuck);
        expect(answer.ms).to.be.below(1_000);
      }
      expect({ status: healthz.status, body: healthz.body, retryAfter: healthz.retryAfter }).to.deep.equal(dead);
    };
    await probe('full');
    const stopped = await service.waitForLog((entry) => entry.msg?.startsWith('the embedded database has stopped') === true, 5_000);
    console.log(`      logged: ${String(stopped.reason)}`);
    expect(stopped.reason).to.match(/^PANIC 53100: could not write to file "pg_wal\/xlogtemp\.\d+": No space left on device$/);

    rmSync(filler);
    await probe(`space freed (${freeMiB(mount)} MiB free), same process`);

    const ended = await stop(service);
    console.log(`      SIGTERM: exit ${ended.code} after ${ended.ms} ms`);
    expect(ended.code).to.equal(0);

    // A supervisor restarting it before there is room is told why. Half a MiB over a whole number, so
    // that the few KiB the service writes before it measures (its lock file) round to the same MiB.
    writeFileSync(filler, Buffer.alloc(Math.floor((freeMiB(mount) - 20.5) * MiB)));
    const early = await runToExit(env);
    const fatal = early.log.find((entry) => entry.msg === 'could not start');
    const free = Math.floor(freeMiB(mount));
    console.log(`      restart with ${free} MiB free: exit ${early.code} after ${early.ms} ms: ${(fatal?.error as Error).message}`);
    expect(early.code).to.equal(1);
    expect(fatal?.error).to.deep.equal({
      type: 'DataDirError',
      message:
        `the embedded database needs at least 64 MiB free to start, and the data folder ${dataDir} has ${free} MiB: ` +
        'free some space on its disk, or set DATA_DIR to a folder on a larger one',
    });

    rmSync(filler);
    const restartedAt = performance.now();
    service = await startServiceProcess(env);
    console.log(`      restart with ${freeMiB(mount)} MiB free: listening after ${Math.round(performance.now() - restartedAt)} ms`);
    const again = service.url;
    expect((await timed(again, 'GET', '/healthz')).status).to.equal(200);
    expect((await timed(again, 'GET', '/readyz')).status).to.equal(200);
    const login = await post(again, '/v1/auth/login', '', { login: 'disk_ada', password: 'disk-pass-1' });
    expect(login.status).to.equal(201);
    const fresh = login.body.data.token as string;
    let kept = 0;
    for (let cursor: string | null = null, first = true; first || cursor; first = false) {
      const page: Timed = await timed(
        again,
        'GET',
        `/v1/projects/disk/events?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        fresh,
      );
      expect(page.status).to.equal(200);
      kept += page.body.data.items.length;
      cursor = page.body.data.next_cursor;
    }
    console.log(`      after the restart: ${kept} events kept of ${acknowledged} acknowledged; ${freeMiB(mount)} MiB free`);
    expect(kept).to.equal(acknowledged);
    expect((await post(again, publish, fresh, { event: 'after' })).status).to.equal(201);
    expect((await stop(service)).code).to.equal(0);
  });
});
