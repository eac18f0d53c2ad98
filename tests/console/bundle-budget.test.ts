/**
 * The console's first page must load at most 150 KB of JavaScript, gzipped: the entry chunk and
 * what it imports statically (index.html's modulepreload links), plus the heaviest page chunk a
 * visitor can land on first. uPlot is loaded by the charts page only. Read from console/dist, which
 * `npm test` builds first (`npm run build:console`).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { expect } from 'chai';

const DIST = path.resolve('console/dist');
const BUDGET = 150 * 1024;

function gzipped(file: string): number {
  return gzipSync(readFileSync(path.join(DIST, file)), { level: 9 }).length;
}

/** The chunks `file` imports statically (`import … from "./x.js"` in a built chunk), transitively. */
function staticClosure(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const code = readFileSync(path.join(DIST, file), 'utf8');
  for (const match of code.matchAll(/(?:^|[;}\s])import\s*(?:[\w*{}\s,$]+from\s*)?["']\.\/([\w.-]+\.js)["']/g))
    staticClosure(`assets/${match[1]}`, seen);
  return seen;
}

describe('the web console bundle', () => {
  before(function () {
    if (!existsSync(path.join(DIST, 'index.html'))) throw new Error('console/dist is missing: run `npm run build:console` (npm test does)');
  });

  it("preloads the project pages' chunk and what it imports (a project's live feed is where most visits land)", () => {
    const html = readFileSync(path.join(DIST, 'index.html'), 'utf8');
    const preloaded = new Set([...html.matchAll(/<link rel="modulepreload" crossorigin href="\/(assets\/[^"]+)"/g)].map((m) => m[1]!));
    const entry = /<script type="module" crossorigin src="\/(assets\/[^"]+\.js)"/.exec(html)![1]!;
    const project = readdirSync(path.join(DIST, 'assets')).find((f) => /^project-[\w-]+\.js$/.test(f));
    expect(project, 'the project pages chunk').to.be.a('string');
    const missing = [...staticClosure(`assets/${project!}`)].filter((file) => file !== entry && !preloaded.has(file));
    expect(missing, 'files the project pages load that index.html does not preload').to.deep.equal([]);
  });

  it('loads at most 150 KB of JavaScript (gzipped) for its first page, and uPlot only on the charts page', () => {
    const html = readFileSync(path.join(DIST, 'index.html'), 'utf8');
    expect(html).not.to.match(/<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    expect(html).not.to.match(/<style|style="/, 'no inline style');
    const entry = /<script type="module" crossorigin src="\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(entry, 'the entry script').to.be.a('string');
    const shell = staticClosure(entry!);
    for (const [, preload] of html.matchAll(/<link rel="modulepreload" crossorigin href="\/(assets\/[^"]+)"/g)) shell.add(preload!);
    const shellBytes = [...shell].reduce((sum, file) => sum + gzipped(file), 0);

    const assets = readdirSync(path.join(DIST, 'assets')).filter((f) => f.endsWith('.js'));
    // Each page chunk with what it imports beyond the shell; the heaviest is the worst first page.
    const pages = assets.map((file) => {
      const closure = [...staticClosure(`assets/${file}`)].filter((f) => !shell.has(f));
      return { file, bytes: closure.reduce((sum, f) => sum + gzipped(f), 0), closure };
    });
    const firstPages = pages.filter((p) => !p.file.startsWith('charts-'));
    const heaviest = firstPages.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    const charts = pages.find((p) => p.file.startsWith('charts-'));
    console.log(
      `      shell ${(shellBytes / 1024).toFixed(1)} KB gzipped (${shell.size} files); heaviest other page ${heaviest.file} +${(heaviest.bytes / 1024).toFixed(1)} KB; charts page +${((charts?.bytes ?? 0) / 1024).toFixed(1)} KB`,
    );
    expect(shellBytes + heaviest.bytes, 'shell + heaviest first page, gzipped').to.be.at.most(BUDGET);

    // uPlot lives in the charts chunk alone.
    expect(charts, 'a charts chunk').to.not.equal(undefined);
    const withUplot = assets.filter((file) => readFileSync(path.join(DIST, 'assets', file), 'utf8').includes('uplot'));
    expect(withUplot, 'chunks carrying uPlot').to.not.be.empty;
    expect(
      withUplot.every((file) => file.startsWith('charts-')),
      `chunks mentioning uPlot: ${withUplot.join(', ')}`,
    ).to.equal(true);
  });
});
