/**
 * The README's "A first session with curl" as a newcomer runs it: its shell blocks, read from
 * README.md as written, run one after another by one bash in the repository's folder against a
 * service of this test's own. Only the address `localhost:3000` is changed (to that service's), and
 * bash gets the service's DATA_DIR (and DATABASE_URL on PostgreSQL), so that the invite command
 * reaches the same database: over the operator socket in the data folder when embedded, directly on
 * PostgreSQL. What the session printed, the service's request log and the service itself then say
 * whether it worked; the repository must be left as it was.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { transcodePng } from '../../server/src/storage/png.js';
import { freshPostgresDatabase } from '../support/harness.js';
import { embeddedServiceEnv, repositoryRoot, startServiceProcess, type ServiceProcess } from '../support/service-process.js';

const SECTION = '## A first session with curl';
const README_ADDRESS = 'localhost:3000';
/** The service's bound on an icon's width and height. */
const MAX_ICON_SIDE = 1024;

/** The ```sh blocks of the README's section, in order. */
function sessionBlocks(): string[] {
  const readme = readFileSync(path.join(repositoryRoot, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n${SECTION}\n`);
  expect(start, `README.md has no "${SECTION}" section`).to.be.greaterThan(-1);
  const end = readme.indexOf('\n## ', start + SECTION.length);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

interface Envelope {
  success: boolean;
  data?: Record<string, unknown>;
}

/**
 * The JSON objects at the top level of `text`, in order: curl prints each answer without a newline,
 * so the session's answers run together, with the stream's messages written in between.
 */
function topLevelObjects(text: string): unknown[] {
  const objects: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (depth > 0 && c === '"') inString = true;
    else if (c === '{') {
      if (depth++ === 0) start = i;
    } else if (c === '}' && depth > 0 && --depth === 0) objects.push(JSON.parse(text.slice(start, i + 1)));
  }
  return objects;
}

/**
 * The `event` messages of the live stream in `text`, as the service writes them (one `data` line),
 * wherever they start: right after an answer's last brace when the stream wrote next.
 */
function streamedEvents(text: string): { id: string; data: Record<string, unknown> }[] {
  return [...text.matchAll(/id: (\S+)\nevent: event\ndata: (.*)\n/g)].map((match) => ({
    id: match[1]!,
    data: JSON.parse(match[2]!) as Record<string, unknown>,
  }));
}

/** Untracked, ignored and changed paths: whatever the session writes in the repository shows here. */
function gitStatus(): string[] {
  return execFileSync('git', ['status', '--porcelain', '--ignored'], { cwd: repositoryRoot, encoding: 'utf8' }).split('\n').filter(Boolean);
}

describe("the README's first session with curl", function () {
  this.timeout(120_000);
  let service: ServiceProcess | undefined;
  let session: ReturnType<typeof spawn> | undefined;
  const cleanups: (() => Promise<void> | void)[] = [];

  /** Ends the stream the session left running in the background: its bash's process group. */
  const endSession = () => {
    if (session?.pid === undefined) return;
    try {
      process.kill(-session.pid, 'SIGTERM');
    } catch {
      // Already gone: every process of the group has ended.
    }
  };

  after(async () => {
    endSession();
    if (service) {
      service.child.kill('SIGTERM');
      await service.exited;
    }
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('runs as written: a sign-up, a project with its icon, a publish the live stream shows; nothing written in the repository', async () => {
    const blocks = sessionBlocks();
    expect(blocks.length, 'shell blocks in the section').to.be.greaterThan(0);
    const written = blocks.join('\n');
    expect(written, `the section's commands call ${README_ADDRESS}`).to.include(README_ADDRESS);

    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-readme-'));
    // The session's own temporary folder (mktemp) is made in here, so that it is found and removed.
    const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-readme-tmp-'));
    cleanups.push(
      () => rmSync(dataDir, { recursive: true, force: true }),
      () => rmSync(tmpDir, { recursive: true, force: true }),
    );
    const fresh = process.env.DATABASE_URL ? await freshPostgresDatabase(process.env.DATABASE_URL, 'sb_readme') : undefined;
    if (fresh) cleanups.push(fresh.drop);
    const database: Record<string, string> = fresh ? { DATABASE_URL: fresh.url } : {};
    service = await startServiceProcess(embeddedServiceEnv(dataDir, { ...database, HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' }));
    const origin = new URL(service.url);

    const before = gitStatus();
    // The run's own DATABASE_URL names the server, not this service's database: bash gets the latter, or none.
    const { DATABASE_URL: _theRuns, ...inherited } = process.env;
    // Strict, so that any command of the session that fails stops it with its status.
    const script = `set -euo pipefail\n${written.replaceAll(README_ADDRESS, origin.host)}`;
    session = spawn('bash', ['-c', script], {
      cwd: repositoryRoot,
      env: { ...inherited, ...database, DATA_DIR: dataDir, TMPDIR: tmpDir },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    // Decoded as a whole, so that a character split between two reads (the event's emoji) stays whole.
    session.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    session.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    // 'exit', not 'close': the stream's curl outlives bash and keeps the pipes open.
    const code = await new Promise<number | null>((resolve) => session!.once('exit', resolve));
    expect(code, `the session failed.\nstdout:\n${stdout}\nstderr:\n${stderr}`).to.equal(0);
    for (let waited = 0; streamedEvents(stdout).length === 0 && waited < 10_000; waited += 50) await sleep(50);
    endSession();
    // Taken at once: edits someone makes meanwhile in the same checkout would count as the session's.
    const after = gitStatus();

    const envelopes = topLevelObjects(stdout).filter((o): o is Envelope => typeof o === 'object' && o !== null && 'success' in o);
    const failed = envelopes.filter((e) => !e.success);
    expect(failed, `answers that failed; stdout:\n${stdout}`).to.deep.equal([]);
    const requested = async (operationId: string, status: number) =>
      service!.waitForLog((entry) => entry.msg === 'request' && entry.operationId === operationId && entry.status === status, 5_000);

    // The sign-up: its answer holds a session token for the invited account.
    await requested('signup', 201);
    const signup = envelopes.find((e) => typeof e.data?.token === 'string' && e.data.user !== undefined);
    expect(signup, `no sign-up answer in:\n${stdout}`).to.not.equal(undefined);
    const token = signup!.data!.token as string;

    // The project, created from the session's file and read back, with the session's PNG as its icon.
    await requested('createProject', 201);
    await requested('getProject', 200);
    const project = envelopes.find((e) => typeof e.data?.namespace === 'string' && typeof e.data.icon === 'string');
    expect(project, `no project answer in:\n${stdout}`).to.not.equal(undefined);
    const namespace = project!.data!.namespace as string;
    const stored = await fetch(`${service.url}/v1/projects/${namespace}`, { headers: { Authorization: `Bearer ${token}` } });
    expect(stored.status).to.equal(200);
    const icon = ((await stored.json()) as Envelope).data!.icon as string;
    expect(icon).to.match(/\/cdn\/icons\/[0-9a-f]{64}\.png$/);
    const served = await fetch(`${service.url}${new URL(icon).pathname}`);
    expect(served.status).to.equal(200);
    expect(served.headers.get('content-type')).to.equal('image/png');
    const iconBytes = Buffer.from(await served.arrayBuffer());
    const work = readdirSync(tmpDir).map((name) => path.join(tmpDir, name));
    const logo = work.map((folder) => path.join(folder, 'logo.png')).find((file) => existsSync(file));
    expect(logo, `the session's logo.png, in a folder of ${tmpDir}`).to.not.equal(undefined);
    expect(existsSync(path.join(path.dirname(logo!), 'project.json')), "the project's JSON beside it").to.equal(true);
    expect(createHash('sha256').update(iconBytes).digest('hex')).to.equal(transcodePng(readFileSync(logo!), MAX_ICON_SIDE).sha256);

    // The publish, answered 201, and the same event in the live stream the session had opened before.
    await requested('publishEvent', 201);
    const published = envelopes.find((e) => typeof e.data?.event === 'string' && typeof e.data.feed === 'string');
    expect(published, `no publish answer in:\n${stdout}`).to.not.equal(undefined);
    const streamed = streamedEvents(stdout);
    expect(
      streamed.map((e) => e.id),
      `the stream's events; stdout:\n${stdout}`,
    ).to.deep.equal([published!.data!.id]);
    expect(streamed[0]!.data).to.deep.equal(published!.data);

    expect(
      after.filter((line) => !before.includes(line)),
      'what the session left in the repository (or, in a checkout someone edits meanwhile, what they changed)',
    ).to.deep.equal([]);
  });
});
