/**
 * The conformance suite as operators get it, by the commands tools/README.md gives while the package
 * is not on the npm registry: packed with `npm pack -w tools` at the repository's root, installed
 * from the tarball into a new, empty project in a temporary folder (no repository around it), and run
 * there as `npx signalboard conformance …` against the live test server; and run straight from the
 * tarball with `npx --yes ./signalboard-tools-<version>.tgz`. The package must carry its own copy of the
 * contract and nothing of the server.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { INVITE_USES } from '../../tools/src/conformance/index.js';
import { baseUrl } from '../support/harness.js';
import { inviteCode } from '../support/accounts.js';
import { runInstalledBin, type Outcome } from '../support/installed-bin.js';

const run = promisify(execFile);
const root = path.resolve('.');

/** The packages installed in `modules` (scoped ones as `@scope/name`), nested ones included. */
function installedPackages(modules: string): Map<string, string> {
  const found = new Map<string, string>();
  if (!existsSync(modules)) return found;
  for (const entry of readdirSync(modules)) {
    if (entry.startsWith('.')) continue;
    const names = entry.startsWith('@') ? readdirSync(path.join(modules, entry)).map((n) => `${entry}/${n}`) : [entry];
    for (const name of names) {
      const dir = path.join(modules, name);
      found.set(name, dir);
      for (const [nested, nestedDir] of installedPackages(path.join(dir, 'node_modules'))) found.set(`${name} > ${nested}`, nestedDir);
    }
  }
  return found;
}

/** `@signalboard/tools` and everything its `dependencies` reach, by name, read from what was installed. */
function dependencyClosure(modules: string): Set<string> {
  const reached = new Set<string>();
  const visit = (name: string) => {
    if (reached.has(name)) return;
    reached.add(name);
    const manifest = JSON.parse(readFileSync(path.join(modules, name, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    for (const dependency of Object.keys(manifest.dependencies ?? {})) visit(dependency);
  };
  visit('@signalboard/tools');
  return reached;
}

function filesUnder(dir: string, base = dir): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    return statSync(full).isDirectory() ? filesUnder(full, base) : [path.relative(base, full).split(path.sep).join('/')];
  });
}

describe('the tools package (npx @signalboard/tools)', function () {
  this.timeout(240_000);
  let dir: string;

  const signalboard = (args: string[]): Promise<Outcome> => runInstalledBin(dir, 'signalboard', args, { maxBuffer: 64 * 1024 * 1024 });

  let tarball: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-tools-consumer-'));
    await run('npm', ['pack', '-w', 'tools', '--pack-destination', dir], { cwd: root });
    tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', `./${tarball}`], { cwd: dir });
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('installs alone: the package (dist, README, LICENSE, its own copy of the contract) and its dependencies, nothing of the server', () => {
    const modules = path.join(dir, 'node_modules');
    const installed = installedPackages(modules);
    const closure = dependencyClosure(modules);
    expect(
      [...installed.keys()].filter((name) => !closure.has(name.split(' > ').pop()!)),
      'installed but not a dependency of the package',
    ).to.deep.equal([]);
    expect(closure).to.include.members(['@signalboard/tools', 'openapi-response-validator']);
    for (const serverSide of [
      '@signalboard/sdk',
      'koa',
      '@mikro-orm/core',
      'pg',
      '@electric-sql/pglite',
      'pino',
      'stripe',
      'bcryptjs',
      'tsx',
    ]) {
      expect(installed.has(serverSide), `${serverSide} installed`).to.equal(false);
    }

    const files = filesUnder(path.join(modules, '@signalboard/tools'));
    expect(
      files.filter((f) => !/^(package\.json|README\.md|LICENSE|dist\/.+\.js|dist\/openapi\.json)$/.test(f)),
      'files outside dist/*.js, the contract, README, LICENSE and package.json',
    ).to.deep.equal([]);
    expect(readFileSync(path.join(modules, '@signalboard/tools/LICENSE'), 'utf8')).to.equal(
      readFileSync(path.join(root, 'LICENSE'), 'utf8'),
    );
    expect(files).to.include.members(['dist/cli.js', 'dist/conformance/index.js', 'dist/openapi.json', 'README.md']);
    const code = files.filter((f) => f.endsWith('.js')).map((f) => readFileSync(path.join(modules, '@signalboard/tools', f), 'utf8'));
    expect(
      code.filter((text) => /from '(\.\.\/)+(server|sdk|spec|tests)\//.test(text)),
      'modules importing from the repository',
    ).to.deep.equal([]);
    expect(readFileSync(path.join(modules, '@signalboard/tools/dist/openapi.json'), 'utf8'), 'the packaged contract').to.equal(
      readFileSync(path.join(root, 'spec/generated/openapi.json'), 'utf8'),
    );
  });

  it(
    'runs `signalboard conformance` against the server: exit 0, the coverage summary, junit.xml and conformance.json that ' + 'pass',
    async () => {
      const code = await inviteCode({ uses: INVITE_USES });
      const reportDir = path.join(dir, 'report');
      const outcome = await signalboard(['conformance', '--base-url', baseUrl(), '--invite-code', code, '--report-dir', reportDir]);
      expect(outcome.code, `${outcome.stdout}\n${outcome.stderr}`).to.equal(0);
      const coverage = /^\s+coverage: operations (\d+)\/(\d+), documented statuses (\d+)\/(\d+) exercised/m.exec(outcome.stdout);
      expect(coverage, 'the coverage summary line').to.not.equal(null);
      expect(coverage![1]).to.equal(coverage![2]);
      console.log(`      packaged run: ${coverage![0].trim()}`);
      expect(outcome.stdout).to.not.include(code);

      const json = path.join(reportDir, 'conformance.json');
      const junit = path.join(reportDir, 'junit.xml');
      expect(existsSync(json) && existsSync(junit), 'both reports written').to.equal(true);
      const result = JSON.parse(readFileSync(json, 'utf8')) as {
        ok: boolean;
        counts: { failed: number; blocked: number };
        uncoveredOperations: string[];
      };
      expect(result.ok).to.equal(true);
      expect(result.counts.failed + result.counts.blocked).to.equal(0);
      expect(result.uncoveredOperations).to.deep.equal([]);
      expect(readFileSync(junit, 'utf8')).to.match(/<testsuites [^>]*tests="[1-9]\d*" failures="0" errors="0"/);
    },
  );

  it("runs as tools/README.md says: straight from the tarball (npx --yes ./signalboard-tools-<version>.tgz), and by the package's name once installed", async () => {
    const readme = readFileSync(path.join(root, 'tools/README.md'), 'utf8');
    for (const command of [
      'npm pack -w tools',
      'npx --yes ./signalboard-tools-<version>.tgz conformance',
      'npm install ./signalboard-tools-<version>.tgz',
      'npx signalboard conformance',
      'npm publish -w tools --access public',
    ])
      expect(readme, 'a command tools/README.md gives').to.include(command);
    expect(tarball).to.match(/^signalboard-tools-\d+\.\d+\.\d+\.tgz$/);

    const bare = mkdtempSync(path.join(os.tmpdir(), 'signalboard-tools-npx-'));
    try {
      copyFileSync(path.join(dir, tarball), path.join(bare, tarball));
      const { stdout } = await run('npx', ['--yes', `./${tarball}`, 'conformance', '--list'], { cwd: bare, maxBuffer: 16 * 1024 * 1024 });
      expect(stdout.trim().split('\n').pop()).to.match(/^\d+ cases over (\d+) of the \1 operations of /);
      expect(readdirSync(bare), 'npx installs nothing into the folder').to.deep.equal([tarball]);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
    const byName = await run('npx', ['--no-install', '@signalboard/tools', '--version'], { cwd: dir });
    expect(byName.stdout).to.match(/^@signalboard\/tools \d+\.\d+\.\d+ \(contract: /);
  });

  it('answers usage errors with exit 2: an unknown command, and conformance without --base-url', async () => {
    const unknown = await signalboard(['nonsense']);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.include('unknown command "nonsense"').and.to.include('npx @signalboard/tools');

    const missing = await signalboard(['conformance']);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.include('--base-url is required');

    const help = await signalboard(['--help']);
    expect(help.code).to.equal(0);
    expect(help.stdout)
      .to.match(/usage: npx @signalboard\/tools <command>/)
      .and.to.match(/^\s+conformance\s/m);
  });
});
