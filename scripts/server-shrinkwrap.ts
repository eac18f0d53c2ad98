/**
 * Writes server/npm-shrinkwrap.json, the exact dependency tree `npx @signalboard/server` installs:
 * the part of the repository's lockfile the server package reaches through its dependencies, with
 * the versions and integrity hashes the tests ran on. Without it an operator's install resolves the
 * package's ranges afresh, and one inconsistent registry release (a package asking for a version of
 * its sibling that was never published) breaks every install. The server's `prepack` runs this and
 * its `postpack` removes the file, so it never sits beside the workspace's own lockfile.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  link?: boolean;
  [field: string]: unknown;
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
const server = lock.packages.server;
if (!server) throw new Error('package-lock.json has no entry for the server workspace');

/** Where Node finds `name` required from the package at `from`: its own node_modules, then each parent's. */
function locate(from: string, name: string): string | undefined {
  for (let at = from; ;) {
    const candidate = `${at ? `${at}/` : ''}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!at) return undefined;
    const parent = at.lastIndexOf('/node_modules/');
    at = parent === -1 ? '' : at.slice(0, parent);
  }
}

/** Everything the server reaches; a required dependency the lockfile lacks is an error, never a guess. */
const reached = new Set<string>();
const visit = (from: string, entry: LockEntry) => {
  const optionalPeers = entry.peerDependenciesMeta ?? {};
  const wanted: [string, boolean][] = [
    ...Object.keys(entry.dependencies ?? {}).map((name): [string, boolean] => [name, true]),
    ...Object.keys(entry.optionalDependencies ?? {}).map((name): [string, boolean] => [name, false]),
    ...Object.keys(entry.peerDependencies ?? {}).map((name): [string, boolean] => [name, !optionalPeers[name]?.optional]),
  ];
  for (const [name, required] of wanted) {
    const at = locate(from, name);
    if (!at) {
      if (required) throw new Error(`package-lock.json has no ${name} for ${from || 'the server'}`);
      continue;
    }
    if (reached.has(at)) continue;
    reached.add(at);
    visit(at, lock.packages[at]!);
  }
};
visit('', server);

/** The workspace lockfile marks what only its tooling needs; in the package's own tree nothing is. */
const withoutWorkspaceMarks = ({ dev: _dev, devOptional: _devOptional, peer: _peer, ...kept }: LockEntry): LockEntry => kept;

const packages: Record<string, LockEntry> = { '': withoutWorkspaceMarks(server) };
for (const at of [...reached].sort()) packages[at] = withoutWorkspaceMarks(lock.packages[at]!);
writeFileSync(
  path.join(root, 'server', 'npm-shrinkwrap.json'),
  `${JSON.stringify({ name: server.name, version: server.version, lockfileVersion: 3, requires: true, packages }, null, 2)}\n`,
);
console.log(`server/npm-shrinkwrap.json: ${reached.size} packages`);
