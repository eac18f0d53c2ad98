/**
 * Other people's tools accept the contract: two widely used client generators, @hey-api/openapi-ts
 * (its types, SDK and fetch client) and orval (its fetch client, models in a file of their own), run
 * on spec/generated/openapi.json into a temporary folder. Each must finish with exit 0 and print no
 * warning, the code it writes must type-check with the repository's TypeScript (strict), and its
 * models must carry the contract's names (`SessionGrantEnvelope`), never names made up from an
 * operation and a status (`Signup201`), which is what a generator falls back to for an unnamed body.
 * Both are pinned development dependencies; Redocly's and Spectral's lints run in CI beside this.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify, stripVTControlCharacters } from 'node:util';
import { expect } from 'chai';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const contract = path.join(root, 'spec/generated/openapi.json');
const bin = {
  heyApi: path.join(root, 'node_modules/@hey-api/openapi-ts/bin/run.js'),
  orval: path.join(root, 'node_modules/orval/dist/bin/orval.js'),
  tsc: path.join(root, 'node_modules/typescript/bin/tsc'),
};
/** Generated code is checked as a client project would build it: strict, for a browser or Node. */
const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'ESNext',
    moduleResolution: 'Bundler',
    lib: ['ES2022', 'DOM', 'DOM.Iterable'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  },
  include: ['hey-api/**/*.ts', 'orval/**/*.ts'],
};
/** A line a generator prints to warn: its words, or the markers hey-api and orval put before one. */
const WARNING = /warn|deprecat|unsupported|❗|⚠/i;
/** A type named after an operation and a status, the generators' name for a body the contract left unnamed. */
const STATUS_NAMED = /^[A-Z]\w*[1-5]\d\d(?![0-9])/;
const NAMED_MODELS = ['SessionGrantEnvelope', 'ProjectEnvelope', 'ProjectPageEnvelope', 'ErrorEnvelope', 'Event'];

interface Outcome {
  /** stdout and stderr, colours removed, one entry a line. */
  lines: string[];
  code: number;
}

async function node(script: string, args: string[], cwd: string): Promise<Outcome> {
  const env = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' };
  const result = await run(process.execPath, [script, ...args], { cwd, env, maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ output: stdout + stderr, code: 0 }),
    (error: { stdout?: string; stderr?: string; code?: number }) => ({
      output: (error.stdout ?? '') + (error.stderr ?? ''),
      code: error.code ?? 1,
    }),
  );
  const lines = stripVTControlCharacters(result.output).split('\n').filter(Boolean);
  return { lines, code: result.code };
}

const exportedTypes = (source: string): string[] => [...source.matchAll(/^export (?:type|interface) (\w+)/gm)].map((m) => m[1]!);

describe('client generators accept the contract', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-generators-'));
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const heyApi = (input: string, output: string) => node(bin.heyApi, ['-i', input, '-o', output, '--no-log-file'], dir);

  it('@hey-api/openapi-ts generates its types and SDK without a warning', async () => {
    const outcome = await heyApi(contract, path.join(dir, 'hey-api'));
    expect(outcome.code, outcome.lines.join('\n')).to.equal(0);
    expect(outcome.lines.filter((line) => WARNING.test(line))).to.deep.equal([]);
    const types = exportedTypes(readFileSync(path.join(dir, 'hey-api/types.gen.ts'), 'utf8'));
    expect(types).to.include.members(NAMED_MODELS);
    expect(types.filter((name) => STATUS_NAMED.test(name))).to.deep.equal([]);
  });

  it('orval generates its fetch client without a warning', async () => {
    const output = path.join(dir, 'orval/api.ts');
    const outcome = await node(bin.orval, ['-i', contract, '-o', output, '--client', 'fetch', '--mode', 'split'], dir);
    expect(outcome.code, outcome.lines.join('\n')).to.equal(0);
    expect(outcome.lines.filter((line) => WARNING.test(line))).to.deep.equal([]);
    const models = exportedTypes(readFileSync(path.join(dir, 'orval/api.schemas.ts'), 'utf8'));
    expect(models).to.include.members(NAMED_MODELS);
    expect(models.filter((name) => STATUS_NAMED.test(name))).to.deep.equal([]);
  });

  it("the code both generate type-checks with the repository's TypeScript", async () => {
    const outcome = await node(bin.tsc, ['-p', path.join(dir, 'tsconfig.json')], dir);
    expect(outcome.lines, 'tsc').to.deep.equal([]);
    expect(outcome.code).to.equal(0);
  });

  it('would see a warning: the `Token` scheme declared as an HTTP scheme is one', async () => {
    const document = JSON.parse(readFileSync(contract, 'utf8')) as { components: { securitySchemes: Record<string, unknown> } };
    document.components.securitySchemes.TokenAuth = { type: 'http', scheme: 'Token' };
    const variant = path.join(dir, 'token-as-http.json');
    writeFileSync(variant, JSON.stringify(document));
    const outcome = await heyApi(variant, path.join(dir, 'hey-api-variant'));
    expect(outcome.lines.filter((line) => WARNING.test(line))).not.to.deep.equal([]);
  });
});
