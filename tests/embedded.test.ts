/**
 * The embedded default as a user runs it: `npm start` builds the service (tsc, `npm run build`) and
 * runs the compiled `dist/server/src/main.js` as its own process with no DATABASE_URL; the operator
 * command beside it, a restart in between.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { createClient } from '../sdk/src/index.js';
import { secret } from './support/harness.js';

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
    createInterface({ input: child.stdout! }).on('line', (line) => {
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
 * keep their sockets right): compiled JavaScript as is, TypeScript (the operator scripts) under tsx.
 */
function run(script: string, args: string[], dataDir: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...(script.endsWith('.ts') ? ['--import', 'tsx'] : []), script, ...args], { cwd: root, env: environment(dataDir), timeout: 90_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

async function invite(dataDir: string, ...args: string[]) {
  const result = await run('scripts/invite.ts', args, dataDir);
  return { ...result, lastLine: result.stdout.trimEnd().split('\n').at(-1) ?? '' };
}

describe('the embedded database (no DATABASE_URL)', function () {
  this.timeout(180_000);
  let dataDir: string;
  let service: Service | undefined;

  before(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-embedded-'));
    const build = await run('node_modules/typescript/bin/tsc', ['-p', 'tsconfig.build.json'], dataDir);
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
    const signup = await createClient({ baseUrl: service.url }).POST('/v1/auth/signup', {
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
    const sdk = createClient({ baseUrl: service.url });
    const login = await sdk.POST('/v1/auth/login', { body: { login: 'embedded_ada', password } });
    expect(login.response.status).to.equal(201);
    secret(login.data!.data.token);
    const again = await sdk.POST('/v1/auth/signup', {
      body: { username: 'embedded_bob', email: 'bob@example.com', password, invite: second },
    });
    expect(again.response.status).to.equal(201);
    secret(again.data!.data.token);
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
