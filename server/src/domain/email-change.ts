/**
 * Changing an account's e-mail address, the identity a password reset link goes to, so the change
 * proves itself three ways: the request needs a session and the password (handlers and the
 * contract's session-only list), the change happens only when a link mailed to the new address is
 * followed, and the old address is told, with a link that undoes it.
 *
 * - Request: a one-time token `emc_…` (1 hour) for the new address, replacing any pending one. The
 *   answer is the same whether or not the address is taken: a taken one fails at the confirmation,
 *   which only the new address's holder sees.
 * - Confirm: the address changes, every reset link of the account is void, and an undo token
 *   `emr_…` (7 days, once) goes to the old address.
 * - Undo: the old address comes back, every session ends, every reset link and pending change is
 *   void. The owner whose address was taken over starts again from there (a reset, a login).
 *   While the undo link lives, its old address is kept for it: a sign-up with it, or another
 *   account's change to it, fails as for a taken address (409 `email_taken` at the sign-up and at
 *   the confirmation; the request answers 202 as ever), so the undo cannot lose the address to
 *   them. The database holds that rule, racing writers included (the migration
 *   Migration20261203000000_email_reservations says how).
 *
 * Tokens are kept as SHA-256 only, with their times on the database's clock. Mail goes after the
 * answer (mail/outbox.ts); without mail, the operator's `user email-link` prints the confirm link.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  deleteSessionsOf,
  findUserIdByUsername,
  issueEmailRevert,
  makeRoomForEmailRevert,
  reissueEmailChange,
  requestEmailChange,
  setEmail,
  takeEmailChange,
  takeEmailRevert,
  voidEmailChange,
  voidResetTokens,
} from '../db/repositories/accounts-rows.js';
import { InvalidEmailToken } from '../errors.js';
import type { Logger } from '../logger.js';
import type { MailOutbox } from '../mail/outbox.js';
import { ACCOUNT_TAKEN } from './accounts.js';
import { hashSecret, mintSecret } from './credentials.js';
import type { Scope } from './scope.js';
import { lockUser, transaction } from '../db/transaction.js';
import { conflictOn } from '../db/unique.js';

const HOUR_MS = 60 * 60 * 1000;
export const EMAIL_CHANGE_TTL_MS = HOUR_MS;
export const EMAIL_REVERT_TTL_MS = 7 * 24 * HOUR_MS;
/** Live undo tokens a user keeps at most (email-changes.ts says which go past it). */
const MAX_LIVE_REVERTS = 10;

/** What every request is told, whether or not another account has the address. */
export const EMAIL_CHANGE_REQUESTED_MESSAGE =
  'A link to confirm the change is on its way to the new address; the address changes when it is followed.';

/** The user asked the operator about has no pending e-mail change, or does not exist. */
export class NoPendingEmailChange extends Error {}

export interface EmailLinkPages {
  /** `EMAIL_CONFIRM_URL`: the page the confirm link opens, the token appended. */
  confirmUrl: string | undefined;
  /** `EMAIL_REVERT_URL`: the page the undo link opens, the token appended. */
  revertUrl: string | undefined;
}

/** The page with the token appended; without a page, the token and the API call that takes it. */
function linkText(page: string | undefined, route: string, token: string): string {
  return page === undefined ? `${token}\n\n(send it as {"token": "…"} to POST ${route})` : `${page}${token}`;
}

export class EmailChanges {
  constructor(
    private readonly outbox: MailOutbox,
    private readonly pages: EmailLinkPages,
    private readonly logger: Logger,
  ) {}

  /**
   * Records the caller's pending change to `email` and mails its link to that address; the handler
   * has checked the password. (Confirming and undoing take a bare `em`: their routes have no caller,
   * the mailed token stands for the account.)
   */
  async request({ em, caller }: Scope, email: string): Promise<void> {
    const { token, tokenHash } = mintSecret('emc_');
    await requestEmailChange(em, caller.userId, email, tokenHash, EMAIL_CHANGE_TTL_MS);
    const sent = this.outbox.post('e-mail change', (mailer) =>
      mailer.send({
        to: email,
        subject: 'Confirm your new Signalboard e-mail address',
        text:
          `Someone, probably you, asked to make this the e-mail address of the Signalboard account ${caller.username}.\n\n` +
          `To confirm, open this link within the next hour:\n\n${linkText(this.pages.confirmUrl, '/v1/auth/email-confirm', token)}\n\n` +
          'If you did not ask for it, ignore this message: nothing changes.\n',
      }),
    );
    if (!sent)
      this.logger.info(
        { userId: caller.userId },
        'e-mail change asked for; no mail sent, the operator can make the link (user email-link)',
      );
  }

  /** Makes the change the token stands for, then mails the old address its undo link. */
  async confirm(em: EntityManager, token: string): Promise<void> {
    const done = await conflictOn(
      () =>
        transaction(em, async (tx) => {
          const change = await takeEmailChange(tx, hashSecret(token));
          if (!change) throw new InvalidEmailToken();
          await lockUser(tx, change.user_id);
          const user = await setEmail(tx, change.user_id, change.new_email);
          if (!user) throw new InvalidEmailToken();
          await voidResetTokens(tx, change.user_id);
          await makeRoomForEmailRevert(tx, change.user_id, MAX_LIVE_REVERTS);
          const revert = mintSecret('emr_');
          await issueEmailRevert(tx, change.user_id, user.old_email, revert.tokenHash, EMAIL_REVERT_TTL_MS);
          return { ...user, userId: change.user_id, newEmail: change.new_email, revertToken: revert.token };
        }),
      ACCOUNT_TAKEN,
    );
    this.logger.info({ userId: done.userId }, 'e-mail address changed');
    this.outbox.post('e-mail changed', (mailer) =>
      mailer.send({
        to: done.old_email,
        subject: 'Your Signalboard e-mail address was changed',
        text:
          `The e-mail address of the Signalboard account ${done.username} is now ${done.newEmail}, in place of this one.\n\n` +
          'If you did not make this change, undo it within 7 days with this link; it restores this address and ' +
          `signs everyone out:\n\n${linkText(this.pages.revertUrl, '/v1/auth/email-revert', done.revertToken)}\n\n` +
          "Then reset your password, and look at the account's API tokens.\n",
      }),
    );
  }

  /** Undoes the change the token stands for, and ends every session of the user. */
  async revert(em: EntityManager, token: string): Promise<void> {
    const userId = await conflictOn(
      () =>
        transaction(em, async (tx) => {
          const revert = await takeEmailRevert(tx, hashSecret(token));
          if (!revert) throw new InvalidEmailToken();
          await lockUser(tx, revert.user_id);
          await setEmail(tx, revert.user_id, revert.old_email);
          await voidResetTokens(tx, revert.user_id);
          await voidEmailChange(tx, revert.user_id);
          await deleteSessionsOf(tx, revert.user_id);
          return revert.user_id;
        }),
      ACCOUNT_TAKEN,
    );
    this.logger.info({ userId }, 'e-mail change undone');
  }
}

/**
 * The operator's `user email-link <username>`: the confirm link of the user's pending change, with
 * a new token good for an hour; NoPendingEmailChange when there is none.
 */
export async function operatorEmailLink(em: EntityManager, username: string, confirmUrl: string | undefined): Promise<string> {
  const userId = await findUserIdByUsername(em, username);
  const { token, tokenHash } = mintSecret('emc_');
  const address = userId && (await reissueEmailChange(em, userId, tokenHash, EMAIL_CHANGE_TTL_MS));
  if (!address) throw new NoPendingEmailChange(`no pending e-mail change for the username "${username}"`);
  return `${confirmUrl ?? ''}${token}`;
}
