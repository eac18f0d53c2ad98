/**
 * Reports of a run: a summary for the terminal, JUnit XML (one test suite per resource, plus one for
 * the coverage of the contract: a test case per operation and documented status, skipped with its
 * reason where a black-box client cannot provoke it), and the whole result as JSON. No secret is
 * written: request bodies are described with passwords, invite codes and tokens masked.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ConformanceResult } from './index.js';

export function coverageLine(result: ConformanceResult): string {
  const c = result.coverage;
  return (
    `operations ${c.operationsCovered}/${c.operationsTotal}, documented statuses ${c.statusesExercised}/${c.statusesTotal} ` +
    `exercised (${c.statusesNotProvokable} not provokable from outside on this run, ${c.gaps} gap${c.gaps === 1 ? '' : 's'})`
  );
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** How the run fared with the deployment's rate limits: what it spent of the sign-in limit, its waits, and 429s it did not ask for. */
export function rateLimitLine(result: ConformanceResult): string {
  const { signInRequests, waits, waitedMs, refusals } = result.counts;
  return (
    `${signInRequests} request${signInRequests === 1 ? '' : 's'} counted against this address's sign-in limit; ` +
    (waits ? `waited ${waits} time${waits === 1 ? '' : 's'} for a limit's window to reset, ${seconds(waitedMs)} in all` : 'no wait') +
    `; ${refusals || 'no'} 429 answer${refusals === 1 ? '' : 's'} the run did not ask for`
  );
}

export function summary(result: ConformanceResult): string {
  const lines: string[] = [];
  const { counts } = result;
  lines.push('');
  lines.push(`Conformance of ${result.baseUrl} to ${result.contract}`);
  lines.push(
    `  cases: ${counts.passed} passed, ${counts.failed} failed, ${counts.blocked} blocked, of ${counts.total}; ${counts.requests} requests`,
  );
  lines.push(`  rate limits: ${rateLimitLine(result)}`);
  lines.push(`  coverage: ${coverageLine(result)}`);
  const failed = result.cases.filter((c) => c.outcome !== 'passed');
  if (failed.length) {
    lines.push('', 'Failed cases:');
    for (const c of failed) {
      lines.push(`  ✗ [${c.group}] ${c.op} ${c.expect}: ${c.title}`);
      for (const f of c.failures) lines.push(`      ${f.replace(/\n/g, '\n      ')}`);
    }
  }
  if (result.nonConformance.length) {
    lines.push('', `Answers that do not match the contract (${result.nonConformance.length}):`);
    for (const n of result.nonConformance.slice(0, 50)) {
      lines.push(`  ✗ ${n.method} ${n.url} → ${n.status}${n.operation ? ` (${n.operation})` : ''}${n.sent ? `, sent: ${n.sent}` : ''}`);
      for (const p of n.problems) lines.push(`      ${p}`);
    }
  }
  if (result.uncoveredOperations.length) {
    lines.push(
      '',
      `Operations of the contract no case reached (${result.counts.blocked ? 'cases that could not run, or ' : ''}no case in ` +
        `tools/src/conformance/checks/ for a new operation):`,
    );
    for (const op of result.uncoveredOperations) lines.push(`  ✗ ${op}`);
  }
  const gaps = result.coverage.operations.flatMap((o) => o.statuses.filter((s) => s.state === 'gap').map((s) => `${o.key} ${s.status}`));
  if (gaps.length) {
    lines.push('', 'Documented statuses a client can provoke that no case produced:');
    for (const g of gaps) lines.push(`  ✗ ${g}`);
  }
  if (result.coverage.notProvokable.length) {
    lines.push('', 'Not provokable from outside on this run:');
    for (const { reason, pairs } of result.coverage.notProvokable) {
      const statuses = [...new Set(pairs.map((p) => p.split(' ').pop()))].join(', ');
      lines.push(`  - ${pairs.length} × ${statuses}: ${reason}${pairs.length <= 3 ? ` (${pairs.join('; ')})` : ''}`);
    }
  }
  const { done, failed: notDone } = result.cleanup;
  if (done.length === 0 && notDone.length === 0)
    lines.push(
      '',
      'Clean-up: nothing left to remove (the cases deleted their projects, revoked their API tokens and ended their sessions)',
    );
  else
    lines.push(
      '',
      `Clean-up of what failed cases left: ` +
        `${done.length ? `done: ${done.join('; ')}` : 'nothing removed'}${notDone.length ? `; FAILED: ${notDone.join('; ')}` : ''}`,
    );
  if (result.cleanup.left.length) lines.push(`  left behind: ${result.cleanup.left.join('; ')}`);
  lines.push(
    '',
    `Run time: ${seconds(result.durationMs)}${counts.waitedMs ? `, ${seconds(counts.waitedMs)} of it waiting on the deployment's rate limits` : ''}`,
  );
  lines.push(result.ok ? 'Result: CONFORMS' : `Result: DOES NOT CONFORM: ${result.reasons.join('; ')}`);
  return lines.join('\n');
}

const xml = (text: string) =>
  text
    // eslint-disable-next-line no-control-regex -- the characters XML 1.0 does not allow, taken out
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');

export function junit(result: ConformanceResult): string {
  const suites = new Map<string, string[]>();
  const stats = new Map<string, { tests: number; failures: number; skipped: number; time: number }>();
  const add = (suite: string, body: string, kind: 'pass' | 'fail' | 'skip', ms = 0) => {
    if (!suites.has(suite)) {
      suites.set(suite, []);
      stats.set(suite, { tests: 0, failures: 0, skipped: 0, time: 0 });
    }
    suites.get(suite)!.push(body);
    const s = stats.get(suite)!;
    s.tests += 1;
    s.time += ms / 1000;
    if (kind === 'fail') s.failures += 1;
    if (kind === 'skip') s.skipped += 1;
  };
  for (const c of result.cases) {
    const name = `${c.op} ${c.expect}: ${c.title}`;
    const open =
      `    <testcase classname="conformance.${xml(c.group.replace(/\s+/g, '-'))}" name="${xml(name)}" ` +
      `time="${(c.ms / 1000).toFixed(3)}"`;
    if (c.outcome === 'passed') {
      add(c.group, `${open}/>`, 'pass', c.ms);
      continue;
    }
    const details = [
      ...c.failures,
      ...c.nonConformance.map((n) => `not as the contract says: ${n.method} ${n.url} → ${n.status}: ${n.problems.join('; ')}`),
    ].join('\n');
    const tag = c.outcome === 'blocked' ? 'skipped' : 'failure';
    const first = details.split('\n')[0] ?? '';
    add(
      c.group,
      `${open}>\n      <${tag} message="${xml(first.slice(0, 300))}">${xml(details)}</${tag}>\n    </testcase>`,
      c.outcome === 'blocked' ? 'skip' : 'fail',
      c.ms,
    );
  }
  for (const op of result.coverage.operations) {
    const open = (name: string) => `    <testcase classname="conformance.coverage" name="${xml(name)}" time="0"`;
    if (!op.covered)
      add(
        'coverage',
        `${open(`${op.key}: has a conformance case`)}>\n      <failure message="no case reaches this operation"/>\n    </testcase>`,
        'fail',
      );
    else add('coverage', `${open(`${op.key}: has a conformance case`)}/>`, 'pass');
    for (const s of op.statuses) {
      const name = `${op.key} ${s.status}`;
      if (s.state === 'exercised') add('coverage', `${open(name)}/>`, 'pass');
      else if (s.state === 'not-provokable')
        add('coverage', `${open(name)}>\n      <skipped message="${xml(s.reason ?? '')}"/>\n    </testcase>`, 'skip');
      else
        add(
          'coverage',
          `${open(name)}>\n      <failure message="documented, provokable, and no case produced it"/>\n    </testcase>`,
          'fail',
        );
    }
  }
  if (!result.cleanup.ok)
    add(
      'clean-up',
      `    <testcase classname="conformance.clean-up" name="removes what the run created" time="0">\n      <failure ` +
        `message="${xml(result.cleanup.failed.join('; ').slice(0, 300))}">${xml(result.cleanup.failed.join('\n'))}</failure>\n    ` +
        `</testcase>`,
      'fail',
    );
  else add('clean-up', '    <testcase classname="conformance.clean-up" name="removes what the run created" time="0"/>', 'pass');

  const totals = [...stats.values()].reduce(
    (a, s) => ({ tests: a.tests + s.tests, failures: a.failures + s.failures, skipped: a.skipped + s.skipped }),
    { tests: 0, failures: 0, skipped: 0 },
  );
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xml(`conformance of ${result.baseUrl}`)}" tests="${totals.tests}" failures="${totals.failures}" errors="0" ` +
      `skipped="${totals.skipped}" time="${(result.durationMs / 1000).toFixed(3)}">`,
  ];
  for (const [suite, cases] of suites) {
    const s = stats.get(suite)!;
    out.push(
      `  <testsuite name="${xml(suite)}" tests="${s.tests}" failures="${s.failures}" errors="0" skipped="${s.skipped}" ` +
        `time="${s.time.toFixed(3)}" timestamp="${result.startedAt.replace(/\.\d+Z$/, '')}">`,
    );
    out.push(...cases);
    out.push('  </testsuite>');
  }
  out.push('</testsuites>', '');
  return out.join('\n');
}

/** Writes `conformance.json` and `junit.xml` into `dir`; returns their paths. */
export function writeReports(result: ConformanceResult, dir: string): { json: string; junit: string } {
  mkdirSync(dir, { recursive: true });
  const files = { json: path.join(dir, 'conformance.json'), junit: path.join(dir, 'junit.xml') };
  writeFileSync(files.json, `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(files.junit, junit(result));
  return files;
}
