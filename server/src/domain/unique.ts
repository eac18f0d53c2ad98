/**
 * Unique violations, named by their constraint. The database decides every race (two creates of
 * one namespace, two invites of one user); this turns the loser's violation into the contract's 409.
 * The driver's message holds the SQL and its values, so it is never passed on.
 */
import { UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Conflict } from '../errors.js';

type ConflictCode = ConstructorParameters<typeof Conflict>[0];

export async function conflictOn<T>(work: () => Promise<T>, byConstraint: Record<string, [ConflictCode, string]>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) {
      const constraint = (error as { constraint?: string }).constraint ?? '';
      const conflict = byConstraint[constraint];
      if (conflict) throw new Conflict(...conflict);
    }
    throw error;
  }
}
