/**
 * The black-box conformance suite (tools/src/conformance/, `npm run conformance`) run by the
 * project's own CI, against two deployments: the run's test server (PostgreSQL when DATABASE_URL is
 * set, else embedded), and a freshly started embedded server with rate limits on and billing
 * configured, so that the suite's `--rate-limits` and `--stripe-webhook-secret` parts run too. Each
 * must conform with every operation covered and no provokable documented status missed; the coverage
 * figures are printed, and the reports (JUnit XML, JSON) are kept in .test-output/conformance/. The
 * package as operators get it (`npx @signalboard/tools conformance`): tests/packages/tools-package.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { INVITE_USES, runConformance, type ConformanceResult } from '../../tools/src/conformance/index.js';
import { coverageLine, summary, writeReports } from '../../tools/src/conformance/report.js';
import { loadConfig } from '../../server/src/config.js';
import { createInviteCode } from '../../server/src/domain/invite-codes.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { baseUrl, database, outputDir, secret } from '../support/harness.js';
import { inviteCode } from '../support/accounts.js';

function print(label: string, result: ConformanceResult, reportDir: string): void {
  const files = writeReports(result, reportDir);
  console.log(
    `      ${label}: ${result.counts.passed}/${result.counts.total} cases passed, ${result.counts.requests} requests, ` +
      `${(result.durationMs / 1000).toFixed(1)} s`,
  );
  console.log(`      coverage: ${coverageLine(result)}`);
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

  it(`the run's own test server (${process.env.DATABASE_URL ? 'PostgreSQL' : 'embedded'}) conforms, every operation covered`, async () => {
    const code = await inviteCode({ uses: INVITE_USES });
    const lines: string[] = [];
    const result = await runConformance({ baseUrl: baseUrl(), inviteCode: code, log: (line) => lines.push(line) });
    print(`against ${database().description}`, result, path.join(outputDir, 'conformance', 'test-server'));
    remember(result);
    expectConformance(result);
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
