/** Applies pending migrations to the configured database (DATABASE_URL, or the embedded one in DATA_DIR). */
import { pino } from 'pino';
import { loadConfig } from '../server/src/config.js';
import { DataDirError, DataDirInUseError } from '../server/src/db/lock.js';
import { applyMigrations, openDatabase } from '../server/src/db/orm.js';

async function main(): Promise<number> {
  const config = loadConfig();
  const logger = pino({ level: process.env.LOG_LEVEL || 'warn', base: { service: 'signalboard' } }, pino.destination(2));
  let db;
  try {
    db = await openDatabase(config, logger, { migrate: false });
  } catch (err) {
    if (!(err instanceof DataDirError)) throw err;
    const hint =
      err instanceof DataDirInUseError
        ? '. The service applies pending migrations itself each time it starts, so there is nothing to do while it runs;' +
          ' stop it first to run them by hand.'
        : '';
    console.error(`migrate: ${err.message}${hint}`);
    return 1;
  }
  try {
    console.log(`Database: ${db.description}`);
    const applied = await applyMigrations(db);
    console.log(
      applied.length === 0 ? 'Nothing to apply: the schema is up to date.' : `Applied:\n${applied.map((name) => `  ${name}`).join('\n')}`,
    );
    return 0;
  } finally {
    await db.close();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`migrate: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exitCode = 1;
  },
);
