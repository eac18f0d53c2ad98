/** Finding an account by its email address, which is unique without regard to case (the `users_email_lower_unique` index), or by its username. */
import { raw, type EntityManager } from '@mikro-orm/postgresql';
import { User } from '../entities.js';

/** The user whose email address, lower-cased, is `email` (which must be lower-case already). */
export async function findUserByEmail(em: EntityManager, email: string): Promise<User | null> {
  return em.findOne(User, { [raw('lower(email)')]: email });
}

/** The id of the user with this username (which must be lower-case already), or undefined. */
export async function findUserIdByUsername(em: EntityManager, username: string): Promise<string | undefined> {
  return (await em.findOne(User, { username }, { fields: ['id'] }))?.id;
}
