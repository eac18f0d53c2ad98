/**
 * The operator's links for deployments that send no mail (or a user whose mail does not arrive),
 * each printed alone on the last line of stdout, for scripts:
 * - `user reset-link <username>`: a password reset link, with a new token good for an hour and
 *   once that replaces the user's earlier one;
 * - `user email-link <username>`: the confirm link of the user's pending e-mail change (asked for
 *   with `PUT /v1/users/me/email`), with a new token good for an hour that replaces the earlier one.
 */
import { loadConfig } from '../config.js';
import { operatorLogger } from '../logger.js';
import { withOperatorStore, type OperatorStore } from './client.js';
import { UsageError } from './usage.js';

/** Lines of the CLI's usage: command, summary. */
export const USER_USAGE = [
  ['user reset-link', 'U: a password reset link for user U, with a new token good for an hour and once'],
  ['', '(PASSWORD_RESET_URL and the token, or the bare token); shown once, alone on the last line'],
  ['user email-link', "U: the confirm link of user U's pending e-mail change, with a new token good for an hour"],
  ['', '(EMAIL_CONFIRM_URL and the token, or the bare token); shown once, alone on the last line'],
] as const;

const COMMANDS = {
  'reset-link': { what: 'Password reset link', make: (store: OperatorStore, username: string) => store.resetLink(username) },
  'email-link': { what: 'E-mail change link', make: (store: OperatorStore, username: string) => store.emailLink(username) },
} as const;

export async function userCommand(argv: string[]): Promise<number> {
  const [command, username, ...rest] = argv;
  if (command === undefined) throw new UsageError(`user: give a command: ${Object.keys(COMMANDS).join(', ')}`);
  if (!Object.hasOwn(COMMANDS, command)) throw new UsageError(`user: unknown command "${command}"`);
  if (username === undefined || username === '' || rest.length > 0) throw new UsageError(`user: ${command} takes exactly one username`);
  const { what, make } = COMMANDS[command as keyof typeof COMMANDS];
  const config = loadConfig();
  // Logs go to stderr, so stdout carries only the answer; never the token itself.
  const logger = operatorLogger();
  // A data folder with no database is refused: a new one would have no users.
  return withOperatorStore(config, logger, { create: false, offered: false }, async (store) => {
    const link = await make(store, username);
    console.log(`${what} for ${username}, good for one hour; made by ${store.via}. Shown only this once:`);
    console.log(link);
    return 0;
  });
}
