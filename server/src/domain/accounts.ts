/**
 * Accounts: sign-up with an invite code, login, and the owner's own changes (username, icon,
 * password; the e-mail address is email-change.ts's). Passwords are hashed with bcrypt before any
 * transaction opens, so a slow hash never holds a database connection, and on a worker thread
 * (passwords.ts), so it never holds the event loop either.
 *
 * A password is checked outside any transaction, and what it opens is written under the user's
 * row lock only if the hash checked is still the user's: a login that read the old password while
 * a change or a reset committed opens no session.
 */
import type { components } from '../../../spec/generated/openapi.js';
import type { User } from '../db/entities.js';
import {
  deleteOtherSessions,
  endSessionsPastCap,
  findUserByEmail,
  findUserByUsername,
  insertUser,
  lockUserWithPassword,
  replacePasswordHash,
  updateUserProfile,
  voidEmailChange,
  voidResetTokens,
} from '../db/repositories/accounts-rows.js';
import { InvalidInvite, InvalidRequest, Unauthenticated } from '../errors.js';
import type { IconStore } from '../storage/icons.js';
import { conflictOn } from '../db/unique.js';
import { deleteAccount } from './account-deletion.js';
import { redeemInviteCode } from './invite-codes.js';
import { openSession, type Device } from './credentials.js';
import { comparePassword, hashPassword } from './passwords.js';
import { lockUser, transaction } from '../db/transaction.js';
import type { SubscriptionCanceller } from './billing.js';
import type { Scope } from './scope.js';

const MAX_PASSWORD_BYTES = 72;

/**
 * A new password longer than bcrypt reads is 400 at `path`: the contract bounds the length in
 * characters, bcrypt reads bytes and stops at 72, so a longer one would match on its first 72 alone.
 */
export function refuseLongPassword(password: string, path: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    throw InvalidRequest.field(path, `must be at most ${MAX_PASSWORD_BYTES} bytes in UTF-8`);
  }
}

/**
 * The unique constraints an account's username and email address must pass, and the 409 each is.
 * An address kept for a live undo link of another account fails as `users_email_lower_unique` too
 * (email-change.ts), so it is refused exactly as a taken one.
 */
export const ACCOUNT_TAKEN = {
  users_username_unique: ['username_taken', 'This username is taken.'],
  users_email_lower_unique: ['email_taken', 'An account with this email address exists.'],
} as const satisfies Parameters<typeof conflictOn>[1];

/** `PATCH /v1/users/me`'s body: a new username, a new icon as a data URL, or null to remove it. */
export type AccountChanges = components['schemas']['UpdateUserRequest'];

export type SignupInput = components['schemas']['SignupRequest'];

/** What the accounts module is built with (services.ts). */
export interface AccountsDeps {
  bcryptRounds: number;
  /** Sessions a user holds at once (`MAX_SESSIONS_PER_USER`): a login past it ends the one used longest ago. */
  sessionsPerUser: number;
  icons: IconStore;
  /** Cancels the subscriptions of the projects an account's delete takes with it. */
  billing: SubscriptionCanceller;
}

/** Accounts: sign-up, login, and the owner's own changes and delete. */
export class Accounts {
  private readonly bcryptRounds: number;
  private readonly sessionsPerUser: number;
  private readonly icons: IconStore;
  private readonly billing: SubscriptionCanceller;

  /**
   * Compared against when the login names no account, so both failures cost one bcrypt compare.
   * Hashed on the worker pool from the start, so neither start-up nor the first login waits for it.
   */
  private readonly decoyHash: Promise<string>;

  constructor({ bcryptRounds, sessionsPerUser, icons, billing }: AccountsDeps) {
    this.bcryptRounds = bcryptRounds;
    this.sessionsPerUser = sessionsPerUser;
    this.icons = icons;
    this.billing = billing;
    this.decoyHash = hashPassword('decoy password, never a real one', bcryptRounds);
    this.decoyHash.catch(() => undefined); // a failure surfaces at the login that needs it
  }

  async signup({ em }: Pick<Scope, 'em'>, input: SignupInput, device: Device) {
    refuseLongPassword(input.password, '/body/password');
    const passwordHash = await hashPassword(input.password, this.bcryptRounds);
    const create = () =>
      transaction(em, async (tx) => {
        // Taken first and in the same transaction: a failed sign-up gives the use back.
        if (!(await redeemInviteCode(tx, input.invite))) throw new InvalidInvite();
        const user = await insertUser(tx, { username: input.username, email: input.email, passwordHash });
        const { session, token } = await openSession(tx, user, device);
        return { user, session, token };
      });
    return conflictOn(create, ACCOUNT_TAKEN);
  }

  async login({ em }: Pick<Scope, 'em'>, login: string, password: string, device: Device) {
    const user = login.includes('@') ? await findUserByEmail(em, login) : await findUserByUsername(em, login);
    // bcrypt reads no further than 72 bytes, so a longer password would match on its first 72 alone.
    // It can never be the password (sign-up refuses it), and is refused as any wrong password is, after
    // the same one compare, so its answer and timing tell nothing.
    const tooLong = Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES;
    const matches = await comparePassword(password, user && !tooLong ? user.passwordHash : await this.decoyHash);
    const refused = () => new Unauthenticated('invalid_credentials', 'Unknown user or wrong password.');
    if (!user || tooLong || !matches) throw refused();
    return transaction(em, async (tx) => {
      if (!(await lockUserWithPassword(tx, user.id, user.passwordHash))) throw refused(); // changed or reset since it was read
      const { session, token } = await openSession(tx, user, device);
      await endSessionsPastCap(tx, user.id, this.sessionsPerUser);
      return { user, session, token };
    });
  }

  /**
   * Asks the signed-in user's password again before an irreversible change: 401
   * `invalid_credentials` when it is wrong (a longer one than bcrypt reads is wrong too, as at login).
   */
  async confirmPassword(user: User, password: string): Promise<void> {
    const tooLong = Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES;
    if (tooLong || !(await comparePassword(password, user.passwordHash))) {
      throw new Unauthenticated('invalid_credentials', 'Wrong password.');
    }
  }

  /**
   * Replaces the caller's password when `current` is the password it has, then ends every session of
   * the user but the caller's own (API tokens stay), voids its reset link and pending e-mail change,
   * and their event streams once it commits. A wrong `current` is 401 `invalid_credentials` and
   * changes nothing. The new hash is written only over the hash `current` was checked against: of
   * two changes racing from one password, one wins and the other is refused as a wrong password.
   */
  async changePassword({ em, caller }: Scope, current: string, next: string): Promise<void> {
    const user = caller.user;
    refuseLongPassword(next, '/body/new_password');
    const checkedHash = user.passwordHash;
    await this.confirmPassword(user, current);
    const passwordHash = await hashPassword(next, this.bcryptRounds);
    return transaction(em, async (tx) => {
      if (!(await replacePasswordHash(tx, user.id, checkedHash, passwordHash)))
        throw new Unauthenticated('invalid_credentials', 'Wrong password.');
      await voidResetTokens(tx, user.id);
      await voidEmailChange(tx, user.id);
      await deleteOtherSessions(tx, user.id, caller.credentialId);
    });
  }

  /**
   * Changes the caller's own username or icon; what `changes` leaves out is kept. The database's
   * unique constraint settles a race for a name (one winner, the other 409).
   * A refused icon is refused before anything is written; an accepted one is stored after the flush
   * that could still refuse the change, in the same transaction, so a refused change stores none.
   */
  async update({ em, caller }: Scope, changes: AccountChanges): Promise<User> {
    const user = caller.user;
    const icon = typeof changes.icon === 'string' ? await this.icons.parse(changes.icon, 'update', '/body/icon', user.id) : undefined;
    const update = () =>
      transaction(em, async (tx) => {
        await lockUser(tx, user.id);
        const current = await updateUserProfile(tx, user.id, {
          ...(changes.username !== undefined && { username: changes.username }),
          ...(changes.icon !== undefined && { icon: icon?.sha256 ?? null }),
        });
        if (icon) await this.icons.save(tx, icon);
        return current;
      });
    return conflictOn(update, ACCOUNT_TAKEN);
  }

  /**
   * Deletes the caller's account once `password` is confirmed again (401 `invalid_credentials`
   * otherwise): account-deletion.ts says what goes with it and what may refuse it.
   */
  async delete({ em, caller }: Scope, password: string): Promise<void> {
    await this.confirmPassword(caller.user, password);
    await deleteAccount(em, this.billing, caller.user);
  }
}
