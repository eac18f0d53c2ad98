/**
 * Root hooks: one real server per run, listening on a free port, on a fresh database.
 * With DATABASE_URL the run creates its own database on that PostgreSQL server (and drops it after);
 * without it, an embedded PGlite database in a new temporary folder. Either way the run says which.
 * Every answer the run gets through fetch is judged against the contract by the conformance
 * package's judge (response-check.ts).
 */
import { baseUrl, startTestServer, stopTestServer } from './harness.js';
import { assertResponsesMatchContract, installResponseCheck } from './response-check.js';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(120_000);
    installResponseCheck(() => [new URL(baseUrl()).origin]);
    await startTestServer();
  },
  async afterAll(this: Mocha.Context) {
    // Reading every table for stored secrets grows with the run (tens of thousands of events and
    // recorded idempotent answers), and the server's drain waits for its kept-alive connections.
    this.timeout(180_000);
    // The server is stopped (and its end-of-run checks run) whatever the contract check found.
    const contractError = await assertResponsesMatchContract().then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    );
    await stopTestServer();
    if (contractError) throw contractError;
  },
};
