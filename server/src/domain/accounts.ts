/**
 * Accounts: sign-up with an invite code, login. Passwords are hashed with bcrypt before any
 * transaction opens, so a slow hash never holds a database connection, and on a worker thread
 * (passwords.ts), so it never holds the event loop either.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { User } from '../db/entities.js';
import { findUserByEmail } from '../db/queries/users.js';
import { InvalidInvite, InvalidRequest, Unauthenticated } from '../errors.js';
import { conflictOn } from './unique.js';
import { redeemInviteCode } from './invite-codes.js';
import { openSession, type Device } from './credentials.js';
import { comparePassword, hashPassword } from './passwords.js';

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

export interface SignupInput {
  username: string;
  email: string;
  password: string;
  invite: string;
}

export class Accounts {
  /**
   * Compared against when the login names no account, so both failures cost one bcrypt compare.
   * Hashed on the worker pool from the start, so neither start-up nor the first login waits for it.
   */
  private readonly decoyHash: Promise<string>;

  constructor(private readonly bcryptRounds: number) {
    this.decoyHash = hashPassword('decoy password, never a real one', bcryptRounds);
    this.decoyHash.catch(() => undefined); // a failure surfaces at the login that needs it
  }

  async signup(em: EntityManager, input: SignupInput, device: Device) {
    refuseLongPassword(input.password, '/body/password');
    const passwordHash = await hashPassword(input.password, this.bcryptRounds);
    const create = () =>
      em.transactional(async (tx) => {
        // Taken first and in the same transaction: a failed sign-up gives the use back.
        if (!(await redeemInviteCode(tx, input.invite))) throw new InvalidInvite();
        const user = tx.create(User, { username: input.username.toLowerCase(), email: input.email, passwordHash, icon: null });
        const { session, token } = openSession(tx, user, device);
        await tx.flush();
        return { user, session, token };
      });
    return conflictOn(create, {
      users_username_unique: ['username_taken', 'This username is taken.'],
      users_email_lower_unique: ['email_taken', 'An account with this email address exists.'],
    });
  }

  async login(em: EntityManager, login: string, password: string, device: Device) {
    const key = login.toLowerCase();
    const user = key.includes('@') ? await findUserByEmail(em, key) : await em.findOne(User, { username: key });
    // bcrypt reads no further than 72 bytes, so a longer password would match on its first 72 alone.
    // It can never be the password (sign-up refuses it), and is refused as any wrong password is, after
    // the same one compare, so its answer and timing tell nothing.
    const tooLong = Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES;
    const matches = await comparePassword(password, user && !tooLong ? user.passwordHash : await this.decoyHash);
    if (!user || tooLong || !matches) throw new Unauthenticated('invalid_credentials', 'Unknown user or wrong password.');
    const { session, token } = openSession(em, user, device);
    await em.flush();
    return { user, session, token };
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
}
