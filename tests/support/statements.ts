import pg from 'pg';

/** A statement as pg puts it on the wire: its text, and its name when it goes as a named prepared statement. */
export interface SentStatement {
  text: string;
  name: string | undefined;
}

/**
 * Every statement sent to PostgreSQL while `fn` runs, counted where pg puts it on the wire, below
 * MikroORM, knex and the service's own hand-written statements alike.
 */
export async function sentDuring(fn: () => Promise<void>): Promise<SentStatement[]> {
  const original = pg.Client.prototype.query;
  const seen: SentStatement[] = [];
  pg.Client.prototype.query = function (this: pg.Client, config: string | { text: string; name?: string }, ...rest: unknown[]) {
    seen.push(typeof config === 'string' ? { text: config, name: undefined } : { text: config.text, name: config.name });
    return (original as (...args: unknown[]) => unknown).call(this, config, ...rest);
  } as typeof original;
  try {
    await fn();
  } finally {
    pg.Client.prototype.query = original;
  }
  return seen;
}

/** The text of every statement sent while `fn` runs (`sentDuring`). */
export async function statementsDuring(fn: () => Promise<void>): Promise<string[]> {
  return (await sentDuring(fn)).map((statement) => statement.text);
}
