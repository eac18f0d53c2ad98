/** Finding an account by its email address, which is unique without regard to case (the `users_email_lower_unique` index). */
import { raw, type EntityManager } from '@mikro-orm/postgresql';
import { User } from '../entities.js';

/** The user whose email address, lower-cased, is `email` (which must be lower-case already). */
export async function findUserByEmail(em: EntityManager, email: string): Promise<User | null> {
  return em.findOne(User, { [raw('lower(email)')]: email });
}
