/**
 * No import circle in the server's nor the console's sources: a module is read before what imports
 * it, so each folder's files form a tree of layers (docs/architecture.md). A type shared by two
 * modules that import each other moves down into a module of its own. Type-only and lazy (`import()`)
 * imports count: they tie the two modules together as much as any other.
 */
import { expect } from 'chai';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { circlesOf, importGraph, readSources, type Circle } from '../support/import-circles.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The circles as a message: each circle's way round, then all the files tied in it. */
function described(circles: Circle[]): string {
  return circles.map(({ files, circle }) => `${circle.join(' -> ')}\n    (${files.length} files: ${files.join(', ')})`).join('\n  ');
}

describe('architecture: import circles', function () {
  for (const folder of ['server/src', 'console/src']) {
    it(`finds none in ${folder}`, function () {
      const sources = readSources(path.join(root, folder));
      expect(sources.size, 'the folder holds sources').to.be.greaterThan(20);
      const circles = circlesOf(importGraph(sources));
      expect(circles, `import circles in ${folder}:\n  ${described(circles)}`).to.deep.equal([]);
    });
  }

  it('names each circle, through type-only, re-export and lazy imports, and a file importing itself', function () {
    const sources = new Map([
      ['page.tsx', "import Tab from './page/tab.tsx';\nconst Lazy = lazy(() => import('./page/lazy.tsx'));"],
      ['page/tab.tsx', "import type { Props } from '../page.tsx';"],
      ['page/lazy.tsx', "export { helper } from '../page.tsx';"],
      ['domain/a.ts', "import { b } from './b.js';"],
      ['domain/b.ts', "import type { C } from './c.js';"],
      ['domain/c.ts', "import { type A } from './a.js';\nimport 'pg';"],
      ['domain/d.ts', "import { a } from './a.js';"],
      ['self.ts', "export type T = import('./self.js').U;"],
      ['lone.ts', "import { x } from './missing.js';"],
    ]);
    expect(circlesOf(importGraph(sources))).to.deep.equal([
      { files: ['domain/a.ts', 'domain/b.ts', 'domain/c.ts'], circle: ['domain/a.ts', 'domain/b.ts', 'domain/c.ts', 'domain/a.ts'] },
      { files: ['page.tsx', 'page/lazy.tsx', 'page/tab.tsx'], circle: ['page.tsx', 'page/lazy.tsx', 'page.tsx'] },
      { files: ['self.ts'], circle: ['self.ts', 'self.ts'] },
    ]);
  });

  it('finds none where imports only point down', function () {
    const sources = new Map([
      ['page.tsx', "import Tab from './page/tab.tsx';\nimport type { Props } from './page/props.ts';"],
      ['page/tab.tsx', "import type { Props } from './props.ts';"],
      ['page/props.ts', 'export interface Props { id: string }'],
    ]);
    expect(circlesOf(importGraph(sources))).to.deep.equal([]);
  });
});
