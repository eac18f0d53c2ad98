/**
 * The SDK's weight in a browser: its ESM entry bundled by esbuild for the browser platform (so a
 * Node.js built-in anywhere in it fails the build), minified and gzipped, against a budget. The
 * budgets leave room to grow (at the time of writing: the whole entry 7.0 kB, the client alone
 * 4.5 kB); a change that passes one needs a reason, not a bigger number.
 */
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { expect } from 'chai';

/** Gzipped bytes of a minified browser bundle of `contents`, an ES module importing the SDK's entry. */
async function bundled(contents: string): Promise<{ gzipped: number; code: string }> {
  const result = await build({
    stdin: { contents, resolveDir: 'sdk/src', loader: 'ts' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    write: false,
    logLevel: 'silent',
  });
  const code = result.outputFiles[0]!.contents;
  return { gzipped: gzipSync(code).length, code: new TextDecoder().decode(code) };
}

describe('SDK: browser bundle size', function () {
  this.timeout(60_000);

  it('the whole entry, minified and gzipped, stays under 10 kB', async () => {
    const { gzipped } = await bundled("export * from './index.js';");
    console.log(`      whole entry: ${(gzipped / 1000).toFixed(1)} kB gzipped`);
    expect(gzipped).to.be.below(10_000);
  });

  it('a bundle using only the client leaves out the low-level client (openapi-fetch) and stays under 6 kB', async () => {
    const { gzipped, code } = await bundled("export { Signalboard, SignalboardError } from './index.js';");
    console.log(`      Signalboard alone: ${(gzipped / 1000).toFixed(1)} kB gzipped`);
    expect(code).not.to.include('querySerializer');
    expect(gzipped).to.be.below(6_000);
  });
});
