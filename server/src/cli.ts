#!/usr/bin/env node
/**
 * `npx @signalboard/server [command]` (the package's bin, `signalboard-server`): the service and its
 * operator commands, with no clone of the repository. In the repository, `npm run migrate`,
 * `npm run invite -- …` and `npm run user -- …` run the same commands from source. Every setting comes from the
 * environment, as for the service.
 *
 * Exit status: the command's own (0 done, 1 failed); 2 for a command line it cannot take, with the
 * usage on stderr; 0 for --help and --version.
 */
import packageJson from '../package.json' with { type: 'json' };
import { ConfigError } from './config.js';
import { DataDirError } from './db/lock.js';
import { InviteCodeInputError } from './domain/invite-codes.js';
import { NoPendingEmailChange } from './domain/email-change.js';
import { UnknownUserError } from './domain/password-reset.js';
import { contractDocument } from './http/contract.js';
import { INVITE_USAGE, inviteCommand } from './operator/invite.js';
import { MIGRATE_SUMMARY, migrateCommand } from './operator/migrate.js';
import { UsageError } from './operator/usage.js';
import { USER_USAGE, userCommand } from './operator/user.js';
import { runService } from './run.js';

async function startCommand(argv: string[]): Promise<number> {
  if (argv.length > 0) throw new UsageError('start takes no arguments: settings come from the environment');
  await runService();
  // The service runs on; its signal handler ends the process with the shutdown's own status.
  return 0;
}

const COMMANDS = new Map<string, (argv: string[]) => Promise<number>>([
  ['start', startCommand],
  ['migrate', migrateCommand],
  ['invite', inviteCommand],
  ['user', userCommand],
]);

const line = (command: string, summary: string) => `  ${command.padEnd(17)}${summary}`;

const USAGE = `usage: npx @signalboard/server [command]    (the package's bin: signalboard-server)

commands:
${line('start', 'run the service (the default); SIGINT or SIGTERM stop it after a drain')}
${line('migrate', MIGRATE_SUMMARY)}
${[...INVITE_USAGE, ...USER_USAGE].map(([command, summary]) => line(command, summary)).join('\n')}
${line('--help', 'this text')}
${line('--version', "this package's version and the contract it serves")}

Settings come from the environment: PORT (default 3000), DATABASE_URL (a PostgreSQL server; unset,
the embedded database in DATA_DIR, default ./data) and the others the README's Configuration lists.`;

async function main(argv: string[]): Promise<number> {
  const [name = 'start', ...rest] = argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (name === '--version' || name === '-v') {
    console.log(`${packageJson.name} ${packageJson.version} (contract: ${contractDocument.info.title} ${contractDocument.info.version})`);
    return 0;
  }
  const command = COMMANDS.get(name);
  try {
    if (!command) throw new UsageError(`unknown command "${name}"`);
    return await command(rest);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    if (error instanceof ConfigError) {
      console.error(`Configuration error: ${error.message}`);
      return 1;
    }
    // Errors an operator can act on are reported by their message alone.
    if (
      error instanceof DataDirError ||
      error instanceof InviteCodeInputError ||
      error instanceof UnknownUserError ||
      error instanceof NoPendingEmailChange
    ) {
      console.error(`${name}: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`signalboard-server: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);
