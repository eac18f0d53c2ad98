/**
 * Root hooks: one real server per run, listening on a free port, on a fresh database.
 * With DATABASE_URL the run creates its own database on that PostgreSQL server (and drops it after);
 * without it, an embedded PGlite database in a new temporary folder. Either way the run says which.
 */
import { startTestServer, stopTestServer } from './harness.js';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(120_000);
    await startTestServer();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopTestServer();
  },
};
