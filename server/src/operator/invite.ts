/**
 * `invite create [--uses N] [--expires-in-days D]` and `invite list`: the operator's invite codes.
 * The new code is printed alone on the last line of stdout, for scripts. In embedded mode an empty
 * data folder is refused unless `--create` is given (client.ts), so a code never lands in a new
 * database no service reads.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import { operatorLogger } from '../logger.js';
import { checkCreateInviteCodeInput, InviteCodeInputError, type InviteCodeRow } from '../domain/invite-codes.js';
import { withOperatorStore } from './client.js';
import { UsageError } from './usage.js';

/** Lines of the CLI's usage: command, summary. */
export const INVITE_USAGE = [
  ['invite create', 'a new code, for --uses N accounts (1-1000000, default 1), valid for'],
  ['', '--expires-in-days D (1-3650, default: no expiry); shown once, alone on the last line'],
  ['invite list', 'the codes (their first characters only), uses left, expiry'],
  ['', 'both refuse a DATA_DIR with no database in it, unless given --create to make one there'],
] as const;

function parse(argv: string[]) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { uses: { type: 'string' }, 'expires-in-days': { type: 'string' }, create: { type: 'boolean' } },
    });
  } catch (err) {
    throw new UsageError(`invite: ${(err as Error).message}`);
  }
  const { positionals, values } = parsed;
  const integer = (name: string, raw: string | undefined) => {
    if (raw === undefined) return undefined;
    if (!/^\d+$/.test(raw)) throw new UsageError(`invite: --${name} must be a whole number, got "${raw}"`);
    return Number(raw);
  };
  if (positionals.length !== 1) throw new UsageError('invite: give exactly one command: create or list');
  const create = values.create === true;
  if (positionals[0] === 'list') {
    if (values.uses !== undefined || values['expires-in-days'] !== undefined)
      throw new UsageError('invite: list takes no options but --create');
    return { command: 'list' as const, create };
  }
  if (positionals[0] !== 'create') throw new UsageError(`invite: unknown command "${positionals[0]}"`);
  const input = { uses: integer('uses', values.uses), expiresInDays: integer('expires-in-days', values['expires-in-days']) };
  try {
    // Checked before the database is opened, which can take seconds.
    return { command: 'create' as const, create, input: checkCreateInviteCodeInput(input) };
  } catch (err) {
    if (err instanceof InviteCodeInputError)
      throw new UsageError(`invite: ${err.message.replace('expires_in_days', '--expires-in-days').replace(/^uses/, '--uses')}`);
    throw err;
  }
}

function table(rows: InviteCodeRow[]): string {
  const day = (d: Date | null) => (d === null ? 'never' : d.toISOString().slice(0, 16).replace('T', ' '));
  const lines = [
    ['CODE', 'USES LEFT', 'EXPIRES (UTC)', 'CREATED (UTC)', 'ID'],
    ...rows.map((r) => [`${r.hint}…`, `${r.uses_left}/${r.uses_total}`, day(r.expires_at), day(r.created_at), r.id]),
  ];
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  return lines
    .map((l) =>
      l
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export async function inviteCommand(argv: string[]): Promise<number> {
  const args = parse(argv);
  const config = loadConfig();
  // Logs go to stderr, so stdout carries only the answer; never the code itself.
  const logger = operatorLogger();
  return withOperatorStore(config, logger, { create: args.create, offered: true }, async (store) => {
    if (args.command === 'list') {
      const rows = await store.list();
      console.log(rows.length === 0 ? 'No invite codes yet.' : table(rows));
      return 0;
    }
    const created = await store.create(args.input);
    const expiry = created.expires_at ? `expires ${created.expires_at.toISOString()}` : 'never expires';
    console.log(
      `Invite code for ${created.uses} account${created.uses === 1 ? '' : 's'}, ${expiry}; made by ${store.via}. Shown only this once:`,
    );
    console.log(created.code);
    return 0;
  });
}
