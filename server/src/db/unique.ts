/**
 * Unique violations, named by their constraint. The database decides every race (two creates of
 * one namespace, two invites of one user); this turns the loser's violation into the contract's 409.
 * The driver's message holds the SQL and its values, so it is never passed on.
 */
import { UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Conflict } from '../errors.js';

type ConflictCode = ConstructorParameters<typeof Conflict>[0];

/**
 * The unique constraint `error` violates, if it is a unique violation: MikroORM's exception for
 * the unit of work, the driver's error (SQLSTATE 23505) for a hand-written statement.
 */
function violatedUnique(error: unknown): string | undefined {
  const { code, constraint } = (error ?? {}) as { code?: unknown; constraint?: unknown };
  const unique = error instanceof UniqueConstraintViolationException || code === '23505';
  return unique && typeof constraint === 'string' ? constraint : undefined;
}

export async function conflictOn<T>(work: () => Promise<T>, byConstraint: Record<string, [ConflictCode, string]>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const conflict = byConstraint[violatedUnique(error) ?? ''];
    if (conflict) throw new Conflict(...conflict);
    throw error;
  }
}
