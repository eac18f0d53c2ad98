/**
 * `migrate`: applies pending migrations to the configured database (DATABASE_URL, or the embedded
 * one in DATA_DIR) and lists them.
 */
import { loadConfig } from '../config.js';
import { operatorLogger } from '../logger.js';
import { DataDirError, DataDirInUseError } from '../db/lock.js';
import { applyMigrations, openDatabase } from '../db/orm.js';
import { UsageError } from './usage.js';

export const MIGRATE_SUMMARY = 'apply pending migrations (the service also applies them at every start)';

export async function migrateCommand(argv: string[]): Promise<number> {
  if (argv.length > 0) throw new UsageError('migrate takes no arguments');
  const config = loadConfig();
  const logger = operatorLogger();
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
