/**
 * The operator commands never make an embedded database by accident: with no DATABASE_URL, `invite`
 * and `user` run against a DATA_DIR that holds no database refuse (exit 1), name the folder, say to
 * use the service's DATA_DIR (or DATABASE_URL) or `--create`, and leave the folder as it was;
 * `invite … --create` makes the database on purpose; a folder with a database works as before. The
 * CLI runs as an operator runs it (server/src/cli.ts under tsx, `npm run -s invite -- …`).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { secret } from '../support/harness.js';

const root = path.resolve('.');

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function environment(dataDir: string): NodeJS.ProcessEnv {
  const { DATABASE_URL: _unused, ...env } = process.env;
  return { ...env, DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
}

function finish(resolve: (outcome: Outcome) => void) {
  return (error: (Error & { code?: unknown }) | null, stdout: string, stderr: string) =>
    resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
}

/** `signalboard-server <args>` from source, as `npm run invite` runs it. */
function cli(dataDir: string, args: string[]): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'server/src/cli.ts', ...args],
      { cwd: root, env: environment(dataDir), timeout: 90_000 },
      finish(resolve),
    );
  });
}

/** `npm run -s <script> -- <args>`, as the README shows it. */
function npmRun(dataDir: string, script: string, args: string[]): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '-s', script, '--', ...args], { cwd: root, env: environment(dataDir), timeout: 90_000 }, finish(resolve));
  });
}

/** The refusal, for `folder`: names it, and says what to do. */
function expectRefused(outcome: Outcome, command: string, folder: string, offersCreate: boolean) {
  expect(outcome.code, outcome.stdout + outcome.stderr).to.equal(1);
  expect(outcome.stdout).to.equal('');
  expect(outcome.stderr).to.include(`${command}: no embedded database in ${folder} `);
  expect(outcome.stderr).to.include('run it with the same DATA_DIR (or DATABASE_URL) the service runs with');
  if (offersCreate) expect(outcome.stderr).to.include(`add --create to make a new database in ${folder} on purpose`);
  else expect(outcome.stderr).not.to.include('--create');
}

describe('operator commands never make an embedded database by accident', function () {
  this.timeout(180_000);
  let parent: string;

  beforeEach(() => {
    parent = mkdtempSync(path.join(os.tmpdir(), 'signalboard-operator-db-'));
  });
  afterEach(() => {
    rmSync(parent, { recursive: true, force: true });
  });

  it('refuses a DATA_DIR that does not exist, naming it, and leaves it absent', async () => {
    const dataDir = path.join(parent, 'data');

    const created = await npmRun(dataDir, 'invite', ['create']);
    expect(created.code, created.stderr).not.to.equal(0);
    expect(created.stderr).to.include(`invite: no embedded database in ${dataDir} `);
    expect(existsSync(dataDir)).to.equal(false);

    expectRefused(await cli(dataDir, ['invite', 'list']), 'invite', dataDir, true);
    expectRefused(await cli(dataDir, ['user', 'reset-link', 'ada']), 'user', dataDir, false);
    expectRefused(await cli(dataDir, ['user', 'email-link', 'ada']), 'user', dataDir, false);
    // A misspelt --create is a usage error (exit 2), not a way in.
    const misspelt = await cli(dataDir, ['invite', 'create', '--creat']);
    expect(misspelt.code, misspelt.stderr).to.equal(2);
    expect(existsSync(dataDir)).to.equal(false);
  });

  it('refuses an empty DATA_DIR and leaves it empty; with --create makes the database, then works as before', async () => {
    const dataDir = path.join(parent, 'empty');
    const relative = path.relative(root, dataDir);

    // A relative DATA_DIR is named resolved, as the service would resolve it.
    mkdirSync(dataDir);
    expectRefused(await cli(relative, ['invite', 'create', '--uses', '2']), 'invite', dataDir, true);
    expect(readdirSync(dataDir)).to.deep.equal([]);

    const made = await cli(dataDir, ['invite', 'create', '--create', '--uses', '2']);
    expect(made.code, made.stderr).to.equal(0);
    const code = secret(made.stdout.trimEnd().split('\n').at(-1));
    expect(code).to.match(/^inv_[a-z2-7]{26}$/);
    expect(made.stdout).to.include('made by embedded PGlite').and.to.include(`in ${dataDir}`);
    expect(existsSync(path.join(dataDir, 'pg', 'PG_VERSION'))).to.equal(true);

    // The database is there now: no --create needed, and the code made with it is in it.
    const listed = await cli(dataDir, ['invite', 'list']);
    expect(listed.code, listed.stderr).to.equal(0);
    expect(listed.stdout).to.include(code.slice(0, 8)).and.to.include('2/2').and.not.to.include(code);

    const another = await cli(dataDir, ['invite', 'create']);
    expect(another.code, another.stderr).to.equal(0);
    secret(another.stdout.trimEnd().split('\n').at(-1));

    // `user` opens it too (and finds no such user: exit 1, for that reason, not the refusal).
    const unknown = await cli(dataDir, ['user', 'reset-link', 'nobody-here']);
    expect(unknown.code).to.equal(1);
    expect(unknown.stderr).to.include('no user with the username "nobody-here"').and.not.to.include('no embedded database');
  });
});
