/**
 * Summarises a `node --cpu-prof` profile: self time by function and by package, and inclusive time
 * of the functions whose name matches `--match`. Usage: tsx bench/profile-summary.ts <file.cpuprofile> [top] [--match re]
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const argv = process.argv.slice(2);
// --last S: only the samples of the profile's last S seconds (the load, not the start-up or the logins).
const lastAt = argv.indexOf('--last');
const lastSeconds = lastAt >= 0 ? Number(argv.splice(lastAt, 2)[1]) : undefined;
const [file, topArg, flag, pattern] = argv;
if (!file) throw new Error('usage: profile-summary.ts <file.cpuprofile> [top] [--match re]');
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const self = new Map<number, number>();
let at = profile.startTime;
const from = lastSeconds === undefined ? -Infinity : profile.endTime - lastSeconds * 1e6;
profile.samples.forEach((id, i) => {
  at += profile.timeDeltas[i] ?? 0;
  if (at >= from) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const total = [...self.values()].reduce((a, b) => a + b, 0);

function where(node: Node): string {
  const url = node.callFrame.url.replace(/^file:\/\//, '').replace(/^.*\/work\/main\//, '');
  return `${node.callFrame.functionName || '(anonymous)'} ${url}:${node.callFrame.lineNumber + 1}`;
}
function pkg(node: Node): string {
  const url = node.callFrame.url;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.includes('/server/src/')) return 'server/src/' + (url.split('/server/src/')[1]?.split('/')[0] ?? '');
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0];
  return url ? url.replace(/^.*\//, '') : node.callFrame.functionName || '(native)';
}

const bySelf = new Map<string, number>();
const byPkg = new Map<string, number>();
for (const [id, us] of self) {
  const node = byId.get(id)!;
  bySelf.set(where(node), (bySelf.get(where(node)) ?? 0) + us);
  byPkg.set(pkg(node), (byPkg.get(pkg(node)) ?? 0) + us);
}
const pct = (us: number) => ((100 * us) / total).toFixed(1).padStart(5) + ' %';
console.log(`profile ${file}: ${(total / 1e6).toFixed(2)} s sampled`);
console.log('\nself time by package:');
for (const [k, v] of [...byPkg].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v)}  ${k}`);
console.log('\nself time by function:');
for (const [k, v] of [...bySelf].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v)}  ${k}`);

if (flag === '--match' && pattern) {
  // Inclusive time: a sample counts for every distinct matching frame on its stack.
  const re = new RegExp(pattern);
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const node = byId.get(cur)!;
      const key = where(node);
      if (re.test(key) && !seen.has(key)) {
        seen.add(key);
        inclusive.set(key, (inclusive.get(key) ?? 0) + us);
      }
    }
  }
  console.log(`\ninclusive time of frames matching ${pattern}:`);
  for (const [k, v] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v)}  ${k}`);
}
