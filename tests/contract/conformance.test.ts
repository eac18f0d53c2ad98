/**
 * The black-box conformance suite (tools/src/conformance/, `npm run conformance`) run by the
 * project's own CI, against two deployments: the run's test server (PostgreSQL when DATABASE_URL is
 * set, else embedded), and a freshly started embedded server with rate limits on and billing
 * configured, so that the suite's `--rate-limits` and `--stripe-webhook-secret` parts run too. Each
 * must conform with every operation covered and no provokable documented status missed; the coverage
 * figures are printed, and the reports (JUnit XML, JSON) are kept in .test-output/conformance/. The
 * package as operators get it (`npx @signalboard/tools conformance`): tests/packages/tools-package.test.ts.
 *
 * tools/README.md's figures come from here: its counts of cases, operations and documented statuses
 * from the suite's listing (`conformance --list`), its coverage and its sign-in requests from these
 * runs, and the length of a run against the default limits from those requests and the service's
 * default sign-in limit. A change to the suite or the contract that moves one fails until the README
 * says it.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { pino } from 'pino';
import { INVITE_USES, runConformance, type ConformanceResult } from '../../tools/src/conformance/index.js';
import { coverageLine, rateLimitLine, summary, writeReports } from '../../tools/src/conformance/report.js';
import { loadConfig } from '../../server/src/config.js';
import { createInviteCode } from '../../server/src/domain/invite-codes.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { baseUrl, database, outputDir, secret } from '../support/harness.js';
import { inviteCode } from '../support/accounts.js';

/**
 * The numbers of the first sentence of `file` that `pattern` matches (whitespace as one space, so a
 * sentence may wrap anywhere).
 */
function stated(file: string, pattern: RegExp, what: string): number[] {
  const text = readFileSync(path.resolve(file), 'utf8').replace(/\s+/g, ' ');
  const match = pattern.exec(text);
  expect(match, `${file} no longer states ${what} as ${String(pattern)}`).to.not.equal(null);
  return match!.slice(1).map(Number);
}

const readme = (pattern: RegExp, what: string) => stated('tools/README.md', pattern, what);

/** The last line of `conformance --list` with `options`, run from source as `npm run conformance` does. */
async function listing(...options: string[]) {
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--import',
    'tsx',
    'tools/src/cli.ts',
    'conformance',
    '--list',
    ...options,
  ]);
  const last = stdout.trim().split('\n').pop()!;
  const match = /^(\d+) cases over (\d+) of the (\d+) operations of .+, which documents (\d+) \(operation, status\) pairs$/.exec(last);
  expect(match, `the listing's last line: ${last}`).to.not.equal(null);
  const [cases, named, operations, pairs] = match!.slice(1).map(Number) as [number, number, number, number];
  return { cases, named, operations, pairs };
}

function print(label: string, result: ConformanceResult, reportDir: string): void {
  const files = writeReports(result, reportDir);
  console.log(
    `      ${label}: ${result.counts.passed}/${result.counts.total} cases passed, ${result.counts.requests} requests, ` +
      `${(result.durationMs / 1000).toFixed(1)} s`,
  );
  console.log(`      coverage: ${coverageLine(result)}`);
  console.log(`      rate limits: ${rateLimitLine(result)}`);
  for (const { reason, pairs } of result.coverage.notProvokable) {
    console.log(`        not provokable: ${pairs.length} × ${[...new Set(pairs.map((p) => p.split(' ').pop()))].join(', ')}: ${reason}`);
  }
  console.log(`      reports: ${path.relative(process.cwd(), files.junit)}, ${path.relative(process.cwd(), files.json)}`);
}

function expectConformance(result: ConformanceResult): void {
  expect(result.ok, summary(result)).to.equal(true);
  expect(result.uncoveredOperations, 'operations without a conformance case').to.deep.equal([]);
  expect(result.coverage.operationsCovered).to.equal(result.coverage.operationsTotal);
}

describe('conformance suite, black box, against running deployments', function () {
  this.timeout(180_000);
  /** (operation, status) pairs exercised by either run, for the combined figure. */
  const exercised = new Set<string>();
  let total = 0;

  const remember = (result: ConformanceResult) => {
    total = result.coverage.statusesTotal;
    for (const op of result.coverage.operations) {
      for (const s of op.statuses) if (s.state === 'exercised') exercised.add(`${op.key} ${s.status}`);
    }
  };

  after(() => {
    if (total > 0) console.log(`\n      both runs together: ${exercised.size}/${total} documented statuses exercised\n`);
  });

  it("tools/README.md counts the cases, operations and documented statuses as the suite's listing does", async () => {
    const plain = await listing();
    const both = await listing('--rate-limits', '--stripe-webhook-secret', 'whsec_listing');
    expect(plain.named, 'operations the cases name').to.equal(plain.operations);
    expect(readme(/ (\d+) of them \((\d+) with both options\) over the (\d+) operations of this release/, 'the cases')).to.deep.equal([
      plain.cases,
      both.cases,
      plain.operations,
    ]);
    expect(readme(/\[ *\d+\/(\d+)\] PATCH /, "the example line's case count")).to.deep.equal([plain.cases]);
    expect(readme(/This release documents (\d+) \(operation, status\) pairs over (\d+) operations/, 'the documented pairs')).to.deep.equal([
      plain.pairs,
      plain.operations,
    ]);
  });

  it(`the run's own test server (${process.env.DATABASE_URL ? 'PostgreSQL' : 'embedded'}) conforms, every operation covered`, async () => {
    const code = await inviteCode({ uses: INVITE_USES });
    const lines: string[] = [];
    const result = await runConformance({ baseUrl: baseUrl(), inviteCode: code, log: (line) => lines.push(line) });
    print(`against ${database().description}`, result, path.join(outputDir, 'conformance', 'test-server'));
    remember(result);
    expectConformance(result);
    // This server counts nothing and sends no RateLimit-* headers: nothing to pace, nothing refused.
    expect([result.counts.waits, result.counts.refusals], 'waits and 429s on a server without rate limits').to.deep.equal([0, 0]);

    // Its settings are the defaults but for the rate limits (off): what it exercises and how many
    // sign-in requests the run sends are what a run against a default deployment does.
    expect(
      readme(/A run without options against a deployment with the default settings exercises (\d+) of them/, 'the coverage'),
    ).to.deep.equal([result.coverage.statusesExercised]);
    const signIn = result.counts.signInRequests;
    const limit = loadConfig({}).rateLimits.auth;
    const windows = Math.ceil(signIn / limit);
    expect(readme(/A run without options sends (\d+) requests that count against it/, 'the sign-in requests')).to.deep.equal([signIn]);
    expect(readme(/default `AUTH_RATE_LIMIT` of (\d+) a minute/, 'the default sign-in limit')).to.deep.equal([limit]);
    expect(
      stated('docs/conformance.md', /which is (\d+) a minute per client address by default/, 'the default sign-in limit'),
    ).to.deep.equal([limit]);
    expect(readme(/need (\d+) windows of a minute, so the run waits (\d+) times/, 'the windows and waits')).to.deep.equal([
      windows,
      windows - 1,
    ]);
    expect(readme(/against the default limits a run takes about (\d+) minutes/, 'the length of a run')).to.deep.equal([windows - 1]);
    expect(stated('docs/conformance.md', /with the default limits, about (\d+) minutes/, 'the length of a run')).to.deep.equal([
      windows - 1,
    ]);
    // The measured run: the sign-in limit's last window opens (windows - 1) minutes after its first
    // at the earliest, so the run can't have been shorter, and every wait is part of its time.
    const [minutes, secs, waitedMinutes, waitedSecs, waits] = readme(
      /a run took (\d+) min (\d+) s, (\d+) min (\d+) s of it in (\d+) waits/,
      'the measured run',
    ) as [number, number, number, number, number];
    expect(waits, 'waits of the measured run').to.equal(windows - 1);
    expect(minutes * 60 + secs, 'the measured run (s)').to.be.at.least((windows - 1) * 60);
    expect(waitedMinutes * 60 + waitedSecs, 'its waits (s)').to.be.at.most(minutes * 60 + secs);
  });

  it(
    'a freshly started embedded server with rate limits on and billing configured conforms, 429 and the webhook 200 ' + 'included',
    async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-conformance-'));
      const webhookSecret = secret(`whsec_conformance_${randomBytes(12).toString('hex')}`);
      const config = {
        ...loadConfig({
          ...process.env,
          DATABASE_URL: '',
          AUTH_RATE_LIMIT: '50',
          API_RATE_LIMIT: '500',
          // Billing on, so the webhook checks signatures; the suite sends only an event type the service
          // ignores and never makes a subscription, so Stripe (an address nothing listens on) is never called.
          STRIPE_SECRET_KEY: 'sk_test_conformance',
          STRIPE_WEBHOOK_SECRET: webhookSecret,
          STRIPE_API_URL: 'http://127.0.0.1:9',
          STRIPE_PRICE_TIERS: '',
          // Checkout and portal configured: the suite's unsold tier (400) and subscription-less
          // portal (409) are refused before anything would call Stripe.
          STRIPE_SUCCESS_URL: 'https://app.example.com/billing/done',
          STRIPE_CANCEL_URL: 'https://app.example.com/billing',
          STRIPE_PORTAL_RETURN_URL: 'https://app.example.com/settings',
        }),
        port: 0,
        host: '127.0.0.1',
        dataDir,
      };
      const logger = pino({ level: 'info' }, pino.destination({ dest: path.join(outputDir, 'server.log'), sync: true }));
      let server: RunningServer | undefined;
      try {
        server = await startServer(config, logger);
        const { code } = await createInviteCode(server.db.orm.em.fork(), { uses: INVITE_USES });
        secret(code);
        const lines: string[] = [];
        const result = await runConformance({
          baseUrl: server.url,
          inviteCode: code,
          rateLimits: true,
          stripeWebhookSecret: webhookSecret,
          log: (line) => lines.push(line),
        });
        print(
          `against a fresh ${server.db.description}, --rate-limits, --stripe-webhook-secret`,
          result,
          path.join(outputDir, 'conformance', 'embedded'),
        );
        remember(result);
        expectConformance(result);
        // Before its 429 cases the run spends more of the sign-in limit than this server's 50 a
        // minute: it waits for the window to reset, as RateLimit-Remaining and RateLimit-Reset say,
        // rather than being refused; the 429s it provokes on purpose still come.
        expect(result.counts.refusals, "429 answers to requests that didn't ask for one").to.equal(0);
        expect(result.counts.waits, 'waits for the sign-in limit').to.be.at.least(1);
        expect(result.counts.waitedMs).to.be.greaterThan(0);
        expect(lines.filter((line) => /nothing left of this address's sign-in limit: waiting \d/.test(line))).to.have.length.at.least(1);
        expect(summary(result)).to.match(/rate limits: \d+ requests counted against this address's sign-in limit; waited \d+ times?/);
        expect(
          readme(
            /with `--rate-limits` and `--stripe-webhook-secret` against a deployment with billing on, (\d+)/,
            'the coverage with both options',
          ),
        ).to.deep.equal([result.coverage.statusesExercised]);
        const webhook = result.coverage.operations.find((o) => o.operationId === 'stripeWebhook');
        expect(webhook?.statuses.find((s) => s.status === 200)?.state, 'the webhook 200 (signed event)').to.equal('exercised');
        const limited = result.coverage.operations.filter((o) => o.statuses.some((s) => s.status === 429 && s.state === 'exercised'));
        expect(limited.length, 'operations that answered 429 to a spent credential').to.be.at.least(result.coverage.operationsTotal - 3);
      } finally {
        await server?.close();
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  );
});
