/**
 * The import circles among a folder's TypeScript files, read from the files' own import syntax by
 * the `typescript` parser (nothing is compiled or run). Every import counts: `import type` and a
 * type-only name too (a circle of types is still two modules that cannot be read one without the
 * other), `export … from`, and `import()` of a string literal (a lazily loaded module still
 * imports). Only relative specifiers are followed: a package is never part of a circle here.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** A source's path (relative to the folder read, with `/`) to the paths it imports. */
export type ImportGraph = Map<string, Set<string>>;

const SOURCE = /\.(ts|tsx|mts|cts)$/;

/** The relative specifiers `text` imports, in the order written. */
export function specifiersOf(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteral(expression)) found.push(expression.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteralLike(argument)) found.push(argument.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found.filter((specifier) => specifier.startsWith('./') || specifier.startsWith('../'));
}

/**
 * The file of `files` that `specifier`, written in `from`, names: as written (`./x.ts`), a `.js`
 * written for its `.ts` or `.tsx` (NodeNext's spelling), without an extension, or a folder's index.
 */
function resolve(from: string, specifier: string, files: Set<string>): string | undefined {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const stem = base.replace(/\.(js|jsx|mjs|cjs)$/, '');
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, `${stem}.mts`, `${stem}.cts`, `${base}/index.ts`, `${base}/index.tsx`];
  return candidates.find((candidate) => files.has(candidate));
}

/** The import graph of `sources` (relative path to text), each import resolved among them. */
export function importGraph(sources: Map<string, string>): ImportGraph {
  const files = new Set(sources.keys());
  const graph: ImportGraph = new Map();
  for (const [file, text] of sources) {
    const targets = specifiersOf(file, text).flatMap((specifier) => resolve(file, specifier, files) ?? []);
    graph.set(file, new Set(targets));
  }
  return graph;
}

/** Every TypeScript source under `dir` (declarations included), by its path relative to `dir`. */
export function readSources(dir: string): Map<string, string> {
  const sources = new Map<string, string>();
  const walk = (folder: string): void => {
    for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
      const full = path.join(folder, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile() && SOURCE.test(entry.name))
        sources.set(path.relative(dir, full).split(path.sep).join('/'), fs.readFileSync(full, 'utf8'));
    }
  };
  walk(dir);
  return sources;
}

/** Files that import one another, each through the others: `files` in path order, `circle` one way round. */
export interface Circle {
  files: string[];
  /** A shortest way from the first of `files` back to itself, e.g. `['a.ts', 'b.ts', 'a.ts']`. */
  circle: string[];
}

/**
 * The circles of `graph`: each strongly connected component of more than one file, and each file
 * that imports itself. Tarjan's algorithm, iterative so a deep chain cannot overflow the stack.
 */
export function circlesOf(graph: ImportGraph): Circle[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let next = 0;
  for (const root of [...graph.keys()].sort()) {
    if (index.has(root)) continue;
    const work: { file: string; targets: string[]; at: number }[] = [];
    const enter = (file: string) => {
      index.set(file, next);
      low.set(file, next++);
      stack.push(file);
      onStack.add(file);
      work.push({ file, targets: [...(graph.get(file) ?? [])].sort(), at: 0 });
    };
    enter(root);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      if (frame.at < frame.targets.length) {
        const target = frame.targets[frame.at++]!;
        if (!index.has(target)) enter(target);
        else if (onStack.has(target)) low.set(frame.file, Math.min(low.get(frame.file)!, index.get(target)!));
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.file, Math.min(low.get(parent.file)!, low.get(frame.file)!));
      if (low.get(frame.file) !== index.get(frame.file)) continue;
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== frame.file);
      if (component.length > 1 || graph.get(frame.file)?.has(frame.file)) components.push(component.sort());
    }
  }
  return components.sort((a, b) => a[0]!.localeCompare(b[0]!)).map((files) => ({ files, circle: circleThrough(graph, files) }));
}

/** A shortest way from the component's first file back to itself, within the component (breadth first). */
function circleThrough(graph: ImportGraph, component: string[]): string[] {
  const start = component[0]!;
  const inside = new Set(component);
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const target of [...(graph.get(file) ?? [])].sort()) {
      if (!inside.has(target)) continue;
      if (target === start) {
        const way = [file];
        while (way[0] !== start) way.unshift(cameFrom.get(way[0]!)!);
        return [...way, start];
      }
      if (!cameFrom.has(target)) {
        cameFrom.set(target, file);
        queue.push(target);
      }
    }
  }
  return [start, start];
}
