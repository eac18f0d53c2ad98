/**
 * The SDK as users get it: packed with `npm pack`, installed into a new, empty project in a
 * temporary folder, type-checked there with tsc (a wrong field must not compile), and run against
 * the live server.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { baseUrl } from './support/harness.js';
import { signUp } from './support/accounts.js';

const run = promisify(execFile);
const root = path.resolve('.');
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');

const CONSUMER_TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    outDir: 'out',
    lib: ['ES2022', 'DOM'],
    types: [],
  },
  include: ['*.ts'],
};

const GOOD = `
import { createClient } from '@signalboard/sdk';

declare const process: { env: Record<string, string | undefined> };

const sb = createClient({ baseUrl: process.env.SB_URL!, token: process.env.SB_TOKEN! });
const me = await sb.GET('/v1/users/me');
const created = await sb.POST('/v1/projects', { body: { name: 'From the package', namespace: process.env.SB_NAMESPACE! } });
console.log(JSON.stringify({ username: me.data?.data.username, namespace: created.data?.data.namespace, status: created.response.status }));
`;

/**
 * A misspelt field (\`namspace\`), a wrong type (\`limit\` as a string) and a field the contract
 * does not define beside all the required ones (\`colour\`, which plain openapi-fetch lets through):
 * none may compile.
 */
const WRONG_FIELDS = `
import { createClient } from '@signalboard/sdk';

const sb = createClient({ baseUrl: 'http://localhost:3000' });
await sb.POST('/v1/projects', { body: { name: 'x', namspace: 'abc' } });
await sb.GET('/v1/projects', { params: { query: { limit: 'ten' } } });
await sb.POST('/v1/projects', { body: { name: 'x', namespace: 'abc', colour: 'red' } });
await sb.PATCH('/v1/projects/{namespace}', { params: { path: { namespace: 'abc' } }, body: { name: 'y', tier: 2 } });
`;

describe('the SDK package', function () {
  this.timeout(240_000);
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-sdk-consumer-'));
    await run('npm', ['pack', '--pack-destination', dir], { cwd: path.join(root, 'sdk') });
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(CONSUMER_TSCONFIG));
    await run('npm', ['install', '--no-audit', '--no-fund', `./${tarball}`], { cwd: dir });
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('installs alone (only its own dependencies, with the licence), type-checks a consumer, and runs it against the server', async () => {
    const installed = readdirSync(path.join(dir, 'node_modules')).sort();
    expect(installed).to.include.members(['@signalboard', 'openapi-fetch']);
    const license = (where: string) => readFileSync(path.join(where, 'LICENSE'), 'utf8');
    expect(license(path.join(dir, 'node_modules/@signalboard/sdk')), 'the package carries the licence').to.equal(license(root));
    writeFileSync(path.join(dir, 'consumer.ts'), GOOD);
    await run(process.execPath, [tsc, '-p', '.'], { cwd: dir });
    const user = await signUp();
    const namespace = `pkg-${user.username.replace(/_/g, '-')}`.slice(0, 40).replace(/-+$/, '');
    const { stdout } = await run(process.execPath, ['out/consumer.js'], {
      cwd: dir,
      env: { ...process.env, SB_URL: baseUrl(), SB_TOKEN: user.token, SB_NAMESPACE: namespace },
    });
    expect(JSON.parse(stdout)).to.deep.equal({ username: user.username, namespace, status: 201 });
  });

  it('refuses to compile calls with a misspelt field, a field of the wrong type, or a field the contract does not define', async () => {
    writeFileSync(path.join(dir, 'consumer.ts'), WRONG_FIELDS);
    const failed = await run(process.execPath, [tsc, '-p', '.', '--noEmit'], { cwd: dir }).then(
      () => undefined,
      (error: { stdout: string }) => error.stdout,
    );
    expect(failed, 'tsc accepted a wrong field').to.be.a('string');
    expect(failed).to.match(/consumer\.ts\(5,\d+\).*namspace/);
    expect(failed).to.match(/consumer\.ts\(6,\d+\)/);
    expect(failed).to.match(/consumer\.ts\(7,\d+\).*colour/);
    expect(failed).to.match(/consumer\.ts\(8,\d+\).*tier/);
  });
});
