/**
 * Password resets. Asking for one answers at once, the same way for every address: the work (the
 * account's lookup, its token, the e-mail) runs after the answer, so neither the answer nor its
 * time tells whether an account has the address, and a slow or broken mail server never reaches
 * the request. A failure there is logged without the token or the address.
 *
 * A reset token is `rst_` and 256 random bits, kept as its SHA-256 only, good for 1 hour and once.
 * A user has at most one: a new one (asked for, or made by the operator's `reset-link`) replaces
 * the earlier one, and a password or e-mail change voids it. Using it sets the password, ends every
 * session of the user and voids a pending e-mail change; API tokens stay, as they do when a
 * password is changed.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { unitOfWork } from '../db/orm.js';
import {
  deleteSessionsOf,
  findUserByEmail,
  findUserIdByUsername,
  issueResetToken,
  setPasswordHash,
  takeResetToken,
  voidEmailChange,
} from '../db/repositories/accounts-rows.js';
import { InvalidResetToken } from '../errors.js';
import type { Logger } from '../logger.js';
import type { MailOutbox } from '../mail/outbox.js';
import type { Mailer } from '../mail/smtp.js';
import { refuseLongPassword } from './accounts.js';
import { hashSecret, mintSecret } from './credentials.js';
import { hashPassword } from './passwords.js';
import { transaction } from '../db/transaction.js';

export const RESET_TOKEN_TTL_MS = 60 * 60 * 1000;
const RESET_TOKEN_PREFIX = 'rst_';

/** What every request is told, whether or not an account has the address. */
export const RESET_REQUESTED_MESSAGE = 'If an account has this email address, a link to reset its password is on its way to it.';

/** The operator asked for a reset link for a username no account has. */
export class UnknownUserError extends Error {}

/** `PASSWORD_RESET_URL` with the token appended, or the bare token when that is unset. */
export function resetLink(baseUrl: string | undefined, token: string): string {
  return `${baseUrl ?? ''}${token}`;
}

/** A new token for the user, replacing any earlier one: the plain token, which is not kept. */
async function issueToken(em: EntityManager, userId: string): Promise<string> {
  const { token, tokenHash } = mintSecret(RESET_TOKEN_PREFIX);
  await issueResetToken(em, userId, tokenHash, RESET_TOKEN_TTL_MS);
  return token;
}

/** The operator's `reset-link <username>`: a link with a new token for that user; UnknownUserError when there is none. */
export async function operatorResetLink(em: EntityManager, username: string, baseUrl: string | undefined): Promise<string> {
  const userId = await findUserIdByUsername(em, username);
  if (!userId) throw new UnknownUserError(`no user with the username "${username}"`);
  return resetLink(baseUrl, await issueToken(em, userId));
}

export class PasswordResets {
  constructor(
    private readonly orm: MikroORM,
    private readonly settings: { bcryptRounds: number; linkBase: string | undefined },
    private readonly outbox: MailOutbox,
    private readonly logger: Logger,
  ) {}

  /** Starts the work of a reset request for `email` and returns at once; never fails. */
  request(email: string): void {
    if (!this.outbox.post('password reset', (mailer) => this.mail(mailer, email))) {
      this.logger.info('password reset asked for; no mail sent (SMTP_URL unset, or too many still being sent)');
    }
  }

  private async mail(mailer: Mailer, email: string): Promise<void> {
    const em = unitOfWork(this.orm);
    const user = await findUserByEmail(em, email);
    if (!user) return;
    const link = resetLink(this.settings.linkBase, await issueToken(em, user.id));
    await mailer.send({
      to: user.email,
      subject: 'Reset your Signalboard password',
      text:
        `Someone, probably you, asked to reset the password of the Signalboard account ${user.username}.\n\n` +
        `To choose a new password, open this link within the next hour:\n\n${link}\n\n` +
        'The link works once. If you did not ask for it, ignore this message: your password stays as it is.\n',
    });
    this.logger.info({ userId: user.id }, 'password reset link sent');
  }

  /**
   * Sets the password of the user whose live token this is, uses the token up and ends every
   * session of the user, in one transaction: the ids of the sessions ended. 400
   * `invalid_reset_token` otherwise, with nothing changed. The password is hashed before the
   * transaction opens, so a slow hash never holds a database connection. It takes a bare `em`:
   * its route has no caller, the mailed token stands for the account.
   */
  async confirm(em: EntityManager, token: string, newPassword: string): Promise<void> {
    refuseLongPassword(newPassword, '/body/new_password');
    const passwordHash = await hashPassword(newPassword, this.settings.bcryptRounds);
    return transaction(em, async (tx) => {
      const userId = await takeResetToken(tx, hashSecret(token));
      if (userId === undefined) throw new InvalidResetToken();
      await setPasswordHash(tx, userId, passwordHash);
      await voidEmailChange(tx, userId);
      await deleteSessionsOf(tx, userId);
    });
  }
}
