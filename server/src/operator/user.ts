/**
 * `user reset-link <username>`: a password reset link for an account, for deployments that send no
 * mail (or a user whose mail does not arrive). It holds a new token, good for an hour and once, that
 * replaces the user's earlier one; the link is printed alone on the last line of stdout, for scripts.
 */
import { pino } from 'pino';
import { loadConfig } from '../config.js';
import { withOperatorStore } from './client.js';
import { UsageError } from './usage.js';

/** Lines of the CLI's usage: command, summary. */
export const USER_USAGE = [
  ['user reset-link', 'U: a password reset link for user U, with a new token good for an hour and once'],
  ['', '(PASSWORD_RESET_URL and the token, or the bare token); shown once, alone on the last line'],
] as const;

export async function userCommand(argv: string[]): Promise<number> {
  const [command, username, ...rest] = argv;
  if (command !== 'reset-link')
    throw new UsageError(command === undefined ? 'user: give a command: reset-link' : `user: unknown command "${command}"`);
  if (username === undefined || username === '' || rest.length > 0) throw new UsageError('user: reset-link takes exactly one username');
  const config = loadConfig();
  // Logs go to stderr, so stdout carries only the answer; never the token itself.
  const logger = pino({ level: process.env.LOG_LEVEL || 'warn', base: { service: 'signalboard' } }, pino.destination(2));
  return withOperatorStore(config, logger, async (store) => {
    const link = await store.resetLink(username);
    console.log(`Password reset link for ${username}, good for one hour and once; made by ${store.via}. Shown only this once:`);
    console.log(link);
    return 0;
  });
}
