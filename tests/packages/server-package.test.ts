/**
 * The service as operators get it without a clone: `@signalboard/server` packed with `npm pack`,
 * installed into a new, empty project in a temporary folder, and run there as `npx
 * signalboard-server` on the embedded database in a data folder of its own: `migrate`, the service
 * itself, an invite code from the package's own `invite` command, a sign-up over HTTP, a stop; and
 * its answers to `--help`, `--version` and a command it does not know.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { embeddedServiceEnv, startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { runInstalledBin, type Outcome } from '../support/installed-bin.js';

const run = promisify(execFile);
const root = path.resolve('.');
const serverPackage = JSON.parse(readFileSync(path.join(root, 'server/package.json'), 'utf8')) as { name: string; version: string };
/** The web console's build in the repository (none when it is not built), relative to console/dist. */
const consoleDist = path.join(root, 'console/dist');
const builtConsole = existsSync(path.join(consoleDist, 'index.html'))
  ? readdirSync(consoleDist, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => path.relative(consoleDist, path.join(entry.parentPath, entry.name)).split(path.sep).join('/'))
      .sort()
  : [];
const migrations = readdirSync(path.join(root, 'server/src/db/migrations'))
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.replace(/\.ts$/, ''))
  .sort();

interface Shrinkwrap {
  packages: Record<string, { name?: string; version?: string; integrity?: string; dependencies?: Record<string, string> }>;
}

describe('the server package (npx @signalboard/server)', function () {
  this.timeout(300_000);
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let service: ServiceProcess | undefined;
  let shrinkwrap: Shrinkwrap;

  const cli = (args: string[]): Promise<Outcome> => runInstalledBin(dir, 'signalboard-server', args, { env, timeout: 90_000 });

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-server-consumer-'));
    env = embeddedServiceEnv(path.join(dir, 'data'));
    const packing = performance.now();
    await run('npm', ['pack', '--pack-destination', dir], { cwd: path.join(root, 'server') });
    const installing = performance.now();
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    await run('tar', ['-xzf', tarball, 'package/npm-shrinkwrap.json'], { cwd: dir });
    shrinkwrap = JSON.parse(readFileSync(path.join(dir, 'package/npm-shrinkwrap.json'), 'utf8')) as Shrinkwrap;
    // From a registry, npm installs a package's shrinkwrapped tree beneath it; from a local tarball it
    // ignores the file. The consumer's lockfile places that tree where the registry install puts it.
    const installed = `node_modules/${serverPackage.name}`;
    const { '': own, ...tree } = shrinkwrap.packages;
    const dependencies = { [serverPackage.name]: `file:${tarball}` };
    const lock = {
      name: 'consumer',
      lockfileVersion: 3,
      requires: true,
      packages: {
        '': { name: 'consumer', dependencies },
        [installed]: { ...own, resolved: `file:${tarball}` },
        ...Object.fromEntries(Object.entries(tree).map(([at, entry]) => [`${installed}/${at}`, entry])),
      },
    };
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, dependencies }));
    writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(lock));
    await run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir });
    const seconds = (from: number, to: number) => `${((to - from) / 1000).toFixed(1)} s`;
    console.log(`      npm pack (with its build): ${seconds(packing, installing)}; npm install: ${seconds(installing, performance.now())}`);
  });

  after(() => {
    // The whole group: npx, and the service it runs.
    if (service && service.child.exitCode === null && service.child.signalCode === null) process.kill(-service.child.pid!, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('carries the compiled service, its own copy of the contract, README and LICENSE; no sources, nothing of the tooling', () => {
    const installed = path.join(dir, 'node_modules', serverPackage.name);
    const files = readdirSync(installed, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => path.relative(installed, path.join(entry.parentPath, entry.name)).split(path.sep).join('/'))
      // Its shrinkwrapped dependencies are installed beneath it.
      .filter((f) => !f.startsWith('node_modules/'));
    expect(
      files.filter(
        (f) =>
          !/^(package\.json|npm-shrinkwrap\.json|README\.md|LICENSE|dist\/server\/package\.json|dist\/spec\/generated\/openapi\.js(on)?|dist\/server\/src\/.+\.js|console\/dist\/.+)$/.test(
            f,
          ),
      ),
      'files outside the compiled service, the contract, the built web console, README, LICENSE and package.json',
    ).to.deep.equal([]);
    // The web console's build, as the repository has it when packed (prepack copies console/dist in).
    expect(files.filter((f) => f.startsWith('console/dist/')).sort(), 'the web console in the package').to.deep.equal(
      builtConsole.map((f) => `console/dist/${f}`),
    );
    expect(files).to.include.members([
      'README.md',
      'dist/server/src/cli.js',
      'dist/server/src/main.js',
      ...migrations.map((name) => `dist/server/src/db/migrations/${name}.js`),
    ]);
    // tsc writes the JSON it compiles in a layout of its own.
    const contract = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as unknown;
    expect(contract(path.join(installed, 'dist/spec/generated/openapi.json')), 'the packaged contract').to.deep.equal(
      contract(path.join(root, 'spec/generated/openapi.json')),
    );
    expect(readFileSync(path.join(installed, 'LICENSE'), 'utf8')).to.equal(readFileSync(path.join(root, 'LICENSE'), 'utf8'));
    for (const tooling of ['typescript', 'tsx', 'mocha', '@signalboard/sdk', '@signalboard/tools']) {
      for (const modules of [path.join(dir, 'node_modules'), path.join(installed, 'node_modules')]) {
        expect(existsSync(path.join(modules, tooling)), `${tooling} installed in ${modules}`).to.equal(false);
      }
    }
  });

  it('installs the dependency tree the repository was tested on, pinned by the npm-shrinkwrap.json it carries', () => {
    const workspaceLock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as Shrinkwrap;
    const { '': own, ...tree } = shrinkwrap.packages;
    expect(own).to.include({ name: serverPackage.name, version: serverPackage.version });
    const pinned = Object.entries(tree);
    expect(pinned.map(([at]) => at)).to.include.members(
      Object.keys(workspaceLock.packages.server!.dependencies!).map((name) => `node_modules/${name}`),
    );
    for (const [at, entry] of pinned) {
      expect(entry, at).to.deep.include({ version: workspaceLock.packages[at]?.version, integrity: workspaceLock.packages[at]?.integrity });
      const installed = JSON.parse(readFileSync(path.join(dir, 'node_modules', serverPackage.name, at, 'package.json'), 'utf8')) as {
        version: string;
      };
      expect(installed.version, at).to.equal(entry.version);
    }
  });

  it('answers --help and --version with exit 0, and an unknown command with its usage on stderr and exit 2', async () => {
    const help = await cli(['--help']);
    expect(help.code, help.stderr).to.equal(0);
    expect(help.stdout)
      .to.match(/^usage: npx @signalboard\/server \[command\]/)
      .and.to.match(/^\s+migrate\s/m)
      .and.to.match(/^\s+invite create\s/m);

    const version = await cli(['--version']);
    expect(version.code, version.stderr).to.equal(0);
    expect(version.stdout.trim()).to.equal(`${serverPackage.name} ${serverPackage.version} (contract: Signalboard API 1.0.0)`);

    const unknown = await cli(['nonsense']);
    expect(unknown.code).to.equal(2);
    expect(unknown.stdout).to.equal('');
    expect(unknown.stderr).to.include('unknown command "nonsense"').and.to.include('usage: npx @signalboard/server');

    const badOption = await cli(['invite', 'create', '--uses', 'many']);
    expect(badOption.code).to.equal(2);
    expect(badOption.stderr).to.include('--uses must be a whole number');
  });

  it('migrates a new data folder, serves on it, makes an invite code through the running service, and stops on Ctrl-C', async () => {
    const migrated = await cli(['migrate']);
    expect(migrated.code, migrated.stderr).to.equal(0);
    expect(migrated.stdout).to.include(`Applied:\n${migrations.map((name) => `  ${name}`).join('\n')}`);

    service = await startServiceProcess(env, 90_000, {
      file: 'npx',
      args: ['--no-install', 'signalboard-server'],
      cwd: dir,
      detached: true,
    });
    const where = await fetch(`${service.url}/`);
    expect(where.status).to.equal(200);
    expect(((await where.json()) as { data: unknown }).data).to.include({ api: '/v1', reference: '/docs', contract: '/v1/openapi.json' });
    // A browser's navigation gets the console the package carries, when it was built before packing.
    const page = await fetch(`${service.url}/`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(page.headers.get('content-type')).to.equal(builtConsole.length ? 'text/html; charset=utf-8' : 'application/json; charset=utf-8');
    await page.arrayBuffer();
    // A new data folder holds no account: the service logs a code to create the first one with.
    const firstRun = await service.waitForLog(
      (entry) => typeof entry.msg === 'string' && entry.msg.startsWith('Create the first account: '),
    );
    expect(firstRun.msg).to.match(new RegExp(`^Create the first account: ${service.url}/signup\\?invite=inv_[a-z2-7]{26}$`));

    const created = await cli(['invite', 'create']);
    expect(created.code, created.stderr).to.equal(0);
    expect(created.stdout).to.include('made by the running service');
    const code = created.stdout.trimEnd().split('\n').at(-1)!;
    expect(code).to.match(/^inv_[a-z2-7]{26}$/);
    const signup = await fetch(`${service.url}/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'packaged', email: 'packaged@example.com', password: 'correct horse', invite: code }),
    });
    expect(signup.status).to.equal(201);
    const { data } = (await signup.json()) as { data: { token: string } };
    const me = await fetch(`${service.url}/v1/users/me`, { headers: { authorization: `Bearer ${data.token}` } });
    expect(me.status).to.equal(200);

    const whileRunning = await cli(['migrate']);
    expect(whileRunning.code).to.equal(1);
    expect(whileRunning.stderr).to.include('stop it first');

    // Ctrl-C in a terminal signals the whole foreground group: npx and the service alike.
    process.kill(-service.child.pid!, 'SIGINT');
    await service.waitForLog((entry) => entry.msg === 'closed');
    await service.exited;

    const again = await cli(['migrate']);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout).to.include('Nothing to apply: the schema is up to date.');
  });
});
