/**
 * Mocha's spec reporter, which also writes how long each test file took (its suites' hooks and
 * tests, from the first suite's start to the last one's end) to the JSON file named by
 * `TEST_DURATIONS_OUT`, when set. scripts/test-suite.ts reads those figures to balance its shards.
 * CommonJS because mocha loads a reporter with require().
 */
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const { reporters, Runner } = require('mocha');

const { EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_RUN_END } = Runner.constants;

class TimedSpecReporter extends reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const out = process.env.TEST_DURATIONS_OUT;
    if (!out) return;
    /** Seconds per file, relative to the working folder. */
    const seconds = {};
    const started = new Map();
    const fileOf = (suite) => (suite.file && suite.parent?.root ? path.relative(process.cwd(), suite.file) : undefined);
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      const file = fileOf(suite);
      if (file) started.set(suite, performance.now());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const file = fileOf(suite);
      if (!file || !started.has(suite)) return;
      seconds[file] = (seconds[file] ?? 0) + (performance.now() - started.get(suite)) / 1000;
    });
    runner.once(EVENT_RUN_END, () => writeFileSync(out, JSON.stringify(seconds)));
  }
}

module.exports = TimedSpecReporter;
