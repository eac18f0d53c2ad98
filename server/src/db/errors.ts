/**
 * What a failed statement's error says about the database, whichever way the statement went:
 * MikroORM wraps the errors of its own statements (DriverException), and raw.ts's statements fail
 * with pg's own DatabaseError.
 */
import { DriverException, ForeignKeyConstraintViolationException } from '@mikro-orm/core';
import pg from 'pg';

/** The SQLSTATE of an error the database raised, or undefined for any other error (a socket's, the pool's). */
export function sqlStateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && (error instanceof DriverException || error instanceof pg.DatabaseError) ? code : undefined;
}

/** A write that refers to a row deleted meanwhile (a foreign key no longer satisfied), by the unit of work or a raw.ts statement. */
export function isMissingReference(error: unknown): boolean {
  return error instanceof ForeignKeyConstraintViolationException || sqlStateOf(error) === '23503';
}
