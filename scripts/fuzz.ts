/**
 * `npm run fuzz`: the fuzz suite of tests/contract/fuzz.test.ts at length (10,000 cases unless told), against
 * a server of its own: startServer on a temporary embedded database, or on DATABASE_URL when set
 * (it then writes its fixture and whatever the fuzzer creates there). Prints the number of cases,
 * the 5xx seen (must be 0), the slowest request and any failure, with fast-check's shrunk
 * counterexample; exits 1 on a failure, a 5xx or an answer the contract's judge (the conformance
 * package's, tools/src/conformance/contract.ts) finds fault with.
 *
 *   npm run fuzz                       10,000 cases, a random seed
 *   npm run fuzz -- --runs 50000       more
 *   npm run fuzz -- --seed 123456      replay a run
 *   npm run fuzz -- --minutes 20       stop generating after that long
 */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { formatReport, runFuzz } from '../tests/support/fuzz/run.js';
import { startFuzzServer } from '../tests/support/fuzz-server.js';
import { assertResponsesMatchContract, installResponseCheck } from '../tests/support/response-check.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: process.env.FUZZ_RUNS || '10000' },
    seed: { type: 'string', default: process.env.FUZZ_SEED || '' },
    minutes: { type: 'string', default: '30' },
  },
});
const numRuns = Number(values.runs);
if (!Number.isInteger(numRuns) || numRuns < 1) throw new Error('--runs must be a positive integer');

installResponseCheck();
// Server errors (the log lines behind a 5xx) go to standard error; nothing else is logged.
const server = await startFuzzServer(process.env, { fresh: false, logger: pino({ level: 'error' }, pino.destination(2)) });
console.log(`fuzzing ${server.url} (${server.db.description}), ${numRuns} cases`);
let exitCode = 0;
try {
  const report = await runFuzz(server, {
    numRuns,
    ...(values.seed ? { seed: Number(values.seed) } : {}),
    timeLimitMs: Number(values.minutes) * 60_000,
    log: (line) => console.log(line),
    verbose: Boolean(process.env.FUZZ_VERBOSE),
  });
  console.log(formatReport(report));
  if (report.failure || report.fiveXX > 0) exitCode = 1;
  try {
    await assertResponsesMatchContract();
  } catch (error) {
    console.log((error as Error).message);
    exitCode = 1;
  }
} finally {
  await server.close();
}
process.exit(exitCode);
