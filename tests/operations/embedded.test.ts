/**
 * The embedded default as a user runs it: `npm start` builds the service (tsc, `npm run build`) and
 * runs the compiled `dist/server/src/main.js` as its own process with no DATABASE_URL; the operator
 * command beside it, a restart in between; what of it other local users can reach (no database port,
 * a data folder closed to them). Then the run's own embedded database: one connection at a time.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { createRawClient } from '../../sdk/src/index.js';
import pg from 'pg';
import { database, secret, sql } from '../support/harness.js';

const root = path.resolve('.');
const MAIN = 'dist/server/src/main.js';

interface Service {
  process: ChildProcess;
  url: string;
  /** From spawn to the first answer of GET /v1. */
  startupMs: number;
}

function environment(dataDir: string): NodeJS.ProcessEnv {
  const { DATABASE_URL: _unused, ...env } = process.env;
  return { ...env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };
}

async function startService(dataDir: string): Promise<Service> {
  const started = performance.now();
  const child = spawn(process.execPath, [MAIN], { cwd: root, env: environment(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the service did not start within 60 s')), 60_000);
    child.once('exit', (code) => reject(new Error(`the service exited with ${code} before listening`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const entry = JSON.parse(line) as { msg?: string; url?: string };
      if (entry.msg === 'listening') {
        clearTimeout(timer);
        resolve(entry.url!);
      }
    });
  });
  const answer = await fetch(`${url}/v1`);
  expect(answer.status).to.equal(200);
  return { process: child, url, startupMs: Math.round(performance.now() - started) };
}

async function stopService(service: Service): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => service.process.once('exit', resolve));
  service.process.kill('SIGTERM');
  return exited;
}

/**
 * Runs a command of ours to completion without blocking the event loop (HTTP clients in this process
 * keep their sockets right): compiled JavaScript as is, TypeScript (the operator CLI, server/src/cli.ts) under tsx.
 */
function run(script: string, args: string[], dataDir: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const argv = [...(script.endsWith('.ts') ? ['--import', 'tsx'] : []), script, ...args];
    execFile(process.execPath, argv, { cwd: root, env: environment(dataDir), timeout: 90_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

async function invite(dataDir: string, ...args: string[]) {
  const result = await run('server/src/cli.ts', ['invite', ...args], dataDir);
  return { ...result, lastLine: result.stdout.trimEnd().split('\n').at(-1) ?? '' };
}

/**
 * The sockets process `pid` listens on, from /proc: the TCP ports (IPv4 and IPv6) and the Unix
 * socket paths whose inodes are among its open files.
 */
function listening(pid: number): { tcp: number[]; unix: string[] } {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const target = (() => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return ''; // closed meanwhile
      }
    })();
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode) inodes.add(inode);
  }
  const rows = (file: string) =>
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/));
  // tcp: local_address (hex ip:port) is field 1, st (0A: LISTEN) field 3, inode field 9.
  const tcp = ['tcp', 'tcp6']
    .flatMap((file) => rows(`/proc/${pid}/net/${file}`))
    .filter((f) => f[3] === '0A' && inodes.has(f[9]!))
    .map((f) => parseInt(f[1]!.split(':')[1]!, 16));
  // unix: flags field 3 (00010000: accepts connections, so listening), inode field 6, path field 7.
  const unix = rows(`/proc/${pid}/net/unix`)
    .filter((f) => f[3] === '00010000' && inodes.has(f[6]!) && f[7])
    .map((f) => f[7]!);
  return { tcp, unix };
}

/** What `cat file` prints as user nobody (65534): the file, or why not. */
function readAsNobody(file: string): string {
  try {
    return execFileSync('cat', [file], { uid: 65534, gid: 65534, stdio: 'pipe' }).toString();
  } catch (err) {
    return (err as { stderr: Buffer }).stderr.toString().trim();
  }
}

/** The permission bits of `file`, and whether this process's user owns it. */
function access(file: string): { mode: string; ours: boolean } {
  const { mode, uid } = statSync(file);
  return { mode: (mode & 0o777).toString(8), ours: uid === process.getuid!() };
}

describe('the embedded database (no DATABASE_URL)', function () {
  this.timeout(180_000);
  let dataDir: string;
  let service: Service | undefined;

  before(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-embedded-'));
    const build = await run('node_modules/typescript/bin/tsc', ['-b', 'tsconfig.build.json'], dataDir);
    expect(build.status, build.stdout + build.stderr).to.equal(0);
  });
  after(async () => {
    if (service) await stopService(service);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts, admits a sign-up with a code made while it runs, and keeps the data across a restart', async () => {
    service = await startService(dataDir);
    console.log(`      first start to first answer: ${service.startupMs} ms`);

    const created = await invite(dataDir, 'create', '--uses', '2');
    expect(created.status, created.stderr).to.equal(0);
    const code = secret(created.lastLine);
    expect(code).to.match(/^inv_[a-z2-7]{26}$/);

    const password = secret('embedded-pass-1');
    const signup = await createRawClient({ baseUrl: service.url }).POST('/v1/auth/signup', {
      body: { username: 'embedded_ada', email: 'ada@example.com', password, invite: code },
    });
    expect(signup.response.status).to.equal(201);
    secret(signup.data!.data.token);

    const listed = await invite(dataDir, 'list');
    expect(listed.status, listed.stderr).to.equal(0);
    expect(listed.stdout).to.contain(code.slice(0, 8)).and.to.contain('1/2').and.not.to.contain(code);

    expect(await stopService(service)).to.equal(0);
    service = undefined;

    // With no service running, the command opens the folder itself.
    const offline = await invite(dataDir, 'create');
    expect(offline.status, offline.stderr).to.equal(0);
    const second = secret(offline.lastLine);

    service = await startService(dataDir);
    console.log(`      restart to first answer: ${service.startupMs} ms`);
    const sdk = createRawClient({ baseUrl: service.url });
    const login = await sdk.POST('/v1/auth/login', { body: { login: 'embedded_ada', password } });
    expect(login.response.status).to.equal(201);
    secret(login.data!.data.token);
    const again = await sdk.POST('/v1/auth/signup', {
      body: { username: 'embedded_bob', email: 'bob@example.com', password, invite: second },
    });
    expect(again.response.status).to.equal(201);
    secret(again.data!.data.token);
  });

  it('listens on no TCP port but HTTP, and on one socket in a folder closed to others (class: database open to local users)', async () => {
    service ??= await startService(dataDir);
    const { tcp, unix } = listening(service.process.pid!);
    console.log(`      listening: TCP ${tcp.join(', ')}; Unix ${unix.join(', ')}`);
    expect(tcp).to.deep.equal([Number(new URL(service.url).port)]);
    expect(unix).to.deep.equal([path.join(dataDir, 'operator.sock')]);
    expect(access(dataDir)).to.deep.equal({ mode: '700', ours: true });
  });

  it('closes an open data folder to other users at start (class: database files readable by other users)', async () => {
    const open = mkdtempSync(path.join(os.tmpdir(), 'signalboard-open-'));
    try {
      chmodSync(open, 0o755);
      const notes = path.join(open, 'notes.txt');
      writeFileSync(notes, 'left here', { mode: 0o644 });
      // As root, what another user (nobody) reads: the file before the start, nothing after it.
      const root = process.getuid!() === 0;
      if (root) expect(readAsNobody(notes)).to.equal('left here');
      const other = await startService(open);
      try {
        expect(access(open)).to.deep.equal({ mode: '700', ours: true });
        if (root) expect(readAsNobody(notes)).to.match(/^cat: .*notes\.txt: Permission denied$/);
      } finally {
        expect(await stopService(other)).to.equal(0);
      }
      expect(access(open)).to.deep.equal({ mode: '700', ours: true });
    } finally {
      rmSync(open, { recursive: true, force: true });
    }
  });

  it('refuses a data folder that belongs to another user, saying so (class: database files readable by other users)', async function () {
    if (process.getuid!() !== 0) {
      console.log('      skipped: only root can give a folder to another user');
      return this.skip();
    }
    const theirs = mkdtempSync(path.join(os.tmpdir(), 'signalboard-theirs-'));
    try {
      chownSync(theirs, 65534, 65534);
      const refused = await run(MAIN, [], theirs);
      const fatal = refused.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { msg?: string; error?: unknown })
        .find((entry) => entry.msg === 'could not start');
      expect(refused.status).to.equal(1);
      expect(fatal?.error).to.deep.equal({
        type: 'DataDirError',
        message:
          `the data folder ${theirs} belongs to user 65534, but this process runs as user 0: run it as user 65534, ` +
          'or give the folder to user 0 (chown)',
      });
      expect(readdirSync(theirs)).to.deep.equal([]);
    } finally {
      rmSync(theirs, { recursive: true, force: true });
    }
  });

  it('serves the operator command through a socket of a 0700 temporary folder when the data folder path is too long for one', async () => {
    const parent = mkdtempSync(path.join(os.tmpdir(), 'signalboard-long-'));
    const long = path.join(parent, 'a-data-folder-whose-path-is-longer-than-a-unix-socket-path-may-be'.repeat(2));
    mkdirSync(long);
    try {
      const other = await startService(long);
      try {
        const { socket } = JSON.parse(readFileSync(path.join(long, 'operator.json'), 'utf8')) as { socket: string };
        expect(path.dirname(socket).startsWith(path.join(os.tmpdir(), 'signalboard-operator-'))).to.equal(true);
        expect(access(path.dirname(socket))).to.deep.equal({ mode: '700', ours: true });
        expect(listening(other.process.pid!).unix).to.deep.equal([socket]);
        const created = await invite(long, 'create');
        expect(created.status, created.stderr).to.equal(0);
        secret(created.lastLine);
        expect(created.stdout).to.contain(`made by the running service (process ${other.process.pid})`);
        expect(await stopService(other)).to.equal(0);
        expect(() => statSync(path.dirname(socket))).to.throw(/ENOENT/);
      } finally {
        if (other.process.exitCode === null) await stopService(other);
      }
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('refuses a second service on the same data folder', async () => {
    service ??= await startService(dataDir);
    const second = await run(MAIN, [], dataDir);
    expect(second.status).to.equal(1);
    expect(second.stdout + second.stderr).to.match(/in use/);
    const still = await fetch(`${service.url}/v1`);
    expect(still.status).to.equal(200);
  });
});

describe('the embedded database in process', () => {
  interface PooledClient {
    query(text: string): Promise<unknown>;
    end(): Promise<void>;
  }
  interface Pool {
    acquireConnection(): Promise<PooledClient>;
    releaseConnection(client: PooledClient): Promise<void>;
  }

  it('takes one connection at a time: a second is refused, the first still serves (class: a second session on PGlite)', async function () {
    const db = database();
    if (db.kind !== 'embedded') {
      console.log('      skipped: this run uses PostgreSQL');
      return this.skip();
    }
    const { connection } = db.orm.config.get<'driverOptions', { connection: pg.ClientConfig }>('driverOptions');
    const refused = await new pg.Client(connection).connect().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).to.include({ severity: 'FATAL', code: '53300', message: 'the embedded database takes one connection at a time' });
    expect(await sql('select 1 as one')).to.deep.equal([{ one: 1 }]);
  });

  it('rolls back what a connection that ends mid-transaction left open (class: a transaction outliving its connection)', async function () {
    const db = database();
    if (db.kind !== 'embedded') {
      console.log('      skipped: this run uses PostgreSQL');
      return this.skip();
    }
    const pool = db.orm.em.getConnection().getKnex().client as Pool;
    const client = await pool.acquireConnection();
    await client.query('begin');
    await client.query('create table left_open (a int)');
    await client.end();
    await pool.releaseConnection(client);
    expect(await sql(`select to_regclass('left_open') as name`)).to.deep.equal([{ name: null }]);
  });
});
