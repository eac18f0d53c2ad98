/**
 * `signalboard conformance --base-url URL --invite-code CODE [--report-dir DIR] [--rate-limits]
 * [--stripe-webhook-secret whsec_…] [--timeout-ms N] [--contract FILE]`: the black-box conformance
 * suite against a running deployment. Prints a progress line per case and a summary, writes JUnit XML
 * and JSON into the report folder, and answers with the exit status: 0 only when every answer matches
 * the contract, every case passed, every operation is covered, and the clean-up completed; 1: does not
 * conform; 2: usage.
 *
 * `signalboard conformance --list [--rate-limits] [--stripe-webhook-secret X] [--contract FILE]`
 * prints the cases such a run would go through, and their count, and sends nothing.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildCases, ContractModel, INVITE_USES, runConformance } from './index.js';
import { summary, writeReports } from './report.js';

export const SUMMARY = 'check a running deployment against the Signalboard contract';

export const USAGE = `usage: npx @signalboard/tools conformance --base-url URL --invite-code CODE [options]
       npx @signalboard/tools conformance --list [--rate-limits] [--stripe-webhook-secret X] [--contract FILE]

  --base-url URL                  the deployment, e.g. https://api.example.com (the suite adds /v1/…)
  --invite-code CODE              an invite code with ${INVITE_USES} uses left (or CONFORMANCE_INVITE_CODE); where
                                  the deployment runs: npm run invite -- create --uses ${INVITE_USES}
  --report-dir DIR                where junit.xml and conformance.json go (default ./conformance-report)
  --rate-limits                   also provoke 429 on every operation: spends the limit of a throwaway
                                  credential, and this address's sign-up/login limit for a minute
  --stripe-webhook-secret SECRET  the deployment's STRIPE_WEBHOOK_SECRET (or CONFORMANCE_STRIPE_WEBHOOK_SECRET):
                                  covers the webhook's 200 with a signed event of a type the service
                                  ignores (nothing changes)
  --timeout-ms N                  per request (default 30000)
  --contract FILE                 judge by another OpenAPI document (default: the contract this
                                  package carries; from source, spec/generated/openapi.json)
  --list                          print the cases a run with these options goes through, and their
                                  count; sends nothing

exit status: 0 conforms, 1 does not, 2 usage error`;

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
        contract: { type: 'string' },
        list: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.help) return undefined;
  const contract = values.contract === undefined ? undefined : path.resolve(values.contract);
  if (contract !== undefined && !existsSync(contract)) throw new UsageError(`--contract: no file ${contract}`);
  const rateLimits = values['rate-limits'] ?? false;
  const stripeWebhookSecret = values['stripe-webhook-secret'] ?? process.env.CONFORMANCE_STRIPE_WEBHOOK_SECRET;
  if (values.list) return { list: true as const, rateLimits, stripeWebhookSecret, contract };
  const baseUrl = values['base-url'];
  if (!baseUrl) throw new UsageError('--base-url is required');
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol))
    throw new UsageError(`--base-url must be an http(s) address, got "${baseUrl}"`);
  const inviteCode = values['invite-code'] ?? process.env.CONFORMANCE_INVITE_CODE;
  if (!inviteCode) throw new UsageError('--invite-code is required (or CONFORMANCE_INVITE_CODE)');
  const timeout = values['timeout-ms'];
  if (timeout !== undefined && !/^\d+$/.test(timeout)) throw new UsageError('--timeout-ms must be a whole number');
  return {
    list: false as const,
    baseUrl,
    inviteCode,
    reportDir: path.resolve(values['report-dir'] ?? 'conformance-report'),
    rateLimits,
    stripeWebhookSecret,
    timeoutMs: timeout === undefined ? undefined : Number(timeout),
    contract,
  };
}

/**
 * The cases in the order a run goes through them, one a line, then the count: `N cases over K
 * operations of <contract>, which documents P (operation, status) pairs`. tools/README.md's figures
 * are checked against this last line (tests/contract/conformance.test.ts).
 */
function list(options: { rateLimits: boolean; stripeWebhookSecret: string | undefined; contract: string | undefined }): void {
  const contract = ContractModel.load(options.contract);
  const cases = buildCases(contract, { rateLimits: options.rateLimits, stripeWebhookSecret: Boolean(options.stripeWebhookSecret) });
  const width = String(cases.length).length;
  for (const [index, def] of cases.entries())
    console.log(`[${String(index + 1).padStart(width)}/${cases.length}] ${def.group}: ${def.op} ${def.expect}: ${def.title}`);
  const named = new Set(cases.map((def) => def.op).filter((op) => contract.operation(op)));
  const pairs = contract.operations.reduce((sum, op) => sum + op.statuses.length, 0);
  console.log(
    `${cases.length} cases over ${named.size} of the ${contract.operations.length} operations of ${contract.title}, which documents ` +
      `${pairs} (operation, status) pairs`,
  );
}

/** Runs the command; resolves to the exit status. */
export async function conformanceCommand(argv: string[]): Promise<number> {
  let args;
  try {
    args = parse(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (!args) {
    console.log(USAGE);
    return 0;
  }
  if (args.list) {
    list(args);
    return 0;
  }
  const result = await runConformance({
    baseUrl: args.baseUrl,
    inviteCode: args.inviteCode,
    rateLimits: args.rateLimits,
    ...(args.stripeWebhookSecret ? { stripeWebhookSecret: args.stripeWebhookSecret } : {}),
    ...(args.timeoutMs ? { timeoutMs: args.timeoutMs } : {}),
    ...(args.contract ? { contractPath: args.contract } : {}),
    log: (line) => console.log(line),
  });
  console.log(summary(result));
  const files = writeReports(result, args.reportDir);
  const shown = (file: string) => (file.startsWith(process.cwd() + path.sep) ? path.relative(process.cwd(), file) : file);
  console.log(`Reports: ${shown(files.junit)}, ${shown(files.json)}`);
  return result.ok ? 0 : 1;
}
