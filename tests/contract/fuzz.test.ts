/**
 * Property-based fuzzing of every operation of the contract (tests/support/fuzz/): at least
 * 2,000 generated and mutated requests, none may get a 5xx or an answer the contract's judge finds
 * fault with, and none that is refused may change the database. The server is the suite's own code on a database of its own
 * (a fresh PGlite folder, or a fresh database on DATABASE_URL's server), with rate limits off and a
 * (never reached) Stripe configuration, so that the webhook checks signatures instead of answering
 * 503 "billing off". FUZZ_RUNS and FUZZ_SEED override the count and replay a seed.
 */
import path from 'node:path';
import { pino } from 'pino';
import { expect } from 'chai';
import { operationsOf } from '../support/fuzz/operations.js';
import { formatReport, runFuzz } from '../support/fuzz/run.js';
import { startFuzzServer, type FuzzServer } from '../support/fuzz-server.js';
import { outputDir, secret } from '../support/harness.js';
import { contractModel } from '../support/response-check.js';

describe('fuzzing every operation of the contract', function () {
  this.timeout(300_000);
  let server: FuzzServer;

  before(async () => {
    // It logs into the run's log, which the end-of-run check searches for leaked secrets.
    server = await startFuzzServer(process.env, {
      logger: pino({ level: 'info' }, pino.destination({ dest: path.join(outputDir, 'server.log'), sync: true })),
    });
  });
  after(async () => {
    await server?.close();
  });

  it('answers 2,000+ generated requests below 500, as the contract says, and refused ones change nothing', async () => {
    const numRuns = Number(process.env.FUZZ_RUNS || 2000);
    const report = await runFuzz(server, {
      numRuns,
      ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}),
      timeLimitMs: 240_000,
      onSecret: (value) => void secret(value),
      log: (line) => console.log(`    ${line}`),
    });
    console.log(formatReport(report).replace(/^/gm, '      '));
    if (report.failure) expect.fail(`fuzzing found a failing request (replay with FUZZ_SEED=${report.seed}):\n${report.failure}`);
    expect(report.fiveXX, '5xx answers').to.equal(0);
    expect(report.runs, 'cases run').to.be.at.least(Math.min(numRuns, 2000));
    expect(Object.keys(report.perOperation).sort(), 'operations covered').to.deep.equal(
      operationsOf(contractModel())
        .map((op) => op.operationId)
        .sort(),
    );
  });
});
