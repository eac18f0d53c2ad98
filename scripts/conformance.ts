/**
 * `npm run conformance -- --base-url URL --invite-code CODE [--report-dir DIR] [--rate-limits]
 * [--stripe-webhook-secret whsec_…]`: the black-box conformance suite against a running deployment
 * (conformance/). Prints a progress line per case and a summary, writes JUnit XML and JSON into the
 * report folder, and exits 0 only when every answer matches the contract, every case passed, every
 * operation is covered, and the clean-up completed. Exit 1: does not conform; 2: usage.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { INVITE_USES, runConformance } from '../conformance/index.js';
import { summary, writeReports } from '../conformance/report.js';

const USAGE = `usage: npm run conformance -- --base-url URL --invite-code CODE [options]

  --base-url URL                  the deployment, e.g. https://api.example.com (the suite adds /v1/…)
  --invite-code CODE              an invite code with ${INVITE_USES} uses left (npm run invite -- create --uses ${INVITE_USES})
  --report-dir DIR                where junit.xml and conformance.json go (default ./conformance-report)
  --rate-limits                   also provoke 429 on every operation: spends the limit of a throwaway
                                  credential, and this address's sign-up/login limit for a minute
  --stripe-webhook-secret SECRET  the deployment's STRIPE_WEBHOOK_SECRET: covers the webhook's 200 with
                                  a signed event of a type the service ignores (nothing changes)
  --timeout-ms N                  per request (default 30000)`;

class UsageError extends Error {}

function parse(argv: string[]) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        'base-url': { type: 'string' },
        'invite-code': { type: 'string' },
        'report-dir': { type: 'string' },
        'rate-limits': { type: 'boolean' },
        'stripe-webhook-secret': { type: 'string' },
        'timeout-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.help) throw new UsageError('');
  const baseUrl = values['base-url'];
  if (!baseUrl) throw new UsageError('--base-url is required');
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol)) throw new UsageError(`--base-url must be an http(s) address, got "${baseUrl}"`);
  const inviteCode = values['invite-code'] ?? process.env.CONFORMANCE_INVITE_CODE;
  if (!inviteCode) throw new UsageError('--invite-code is required (or CONFORMANCE_INVITE_CODE)');
  const timeout = values['timeout-ms'];
  if (timeout !== undefined && !/^\d+$/.test(timeout)) throw new UsageError('--timeout-ms must be a whole number');
  return {
    baseUrl,
    inviteCode,
    reportDir: path.resolve(values['report-dir'] ?? 'conformance-report'),
    rateLimits: values['rate-limits'] ?? false,
    stripeWebhookSecret: values['stripe-webhook-secret'] ?? process.env.CONFORMANCE_STRIPE_WEBHOOK_SECRET,
    timeoutMs: timeout === undefined ? undefined : Number(timeout),
  };
}

async function main(): Promise<number> {
  let args;
  try {
    args = parse(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(error.message ? `${error.message}\n\n${USAGE}` : USAGE);
    return 2;
  }
  const result = await runConformance({
    baseUrl: args.baseUrl,
    inviteCode: args.inviteCode,
    rateLimits: args.rateLimits,
    ...(args.stripeWebhookSecret ? { stripeWebhookSecret: args.stripeWebhookSecret } : {}),
    ...(args.timeoutMs ? { timeoutMs: args.timeoutMs } : {}),
    log: (line) => console.log(line),
  });
  console.log(summary(result));
  const files = writeReports(result, args.reportDir);
  const shown = (file: string) => (file.startsWith(process.cwd() + path.sep) ? path.relative(process.cwd(), file) : file);
  console.log(`Reports: ${shown(files.junit)}, ${shown(files.json)}`);
  return result.ok ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`conformance: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);
