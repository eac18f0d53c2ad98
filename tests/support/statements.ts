import pg from 'pg';

/**
 * Every statement sent to PostgreSQL while `fn` runs, counted where pg puts it on the wire, below
 * MikroORM, knex and the service's own hand-written statements alike.
 */
export async function statementsDuring(fn: () => Promise<void>): Promise<string[]> {
  const original = pg.Client.prototype.query;
  const seen: string[] = [];
  pg.Client.prototype.query = function (this: pg.Client, config: string | { text: string }, ...rest: unknown[]) {
    seen.push(typeof config === 'string' ? config : config.text);
    return (original as (...args: unknown[]) => unknown).call(this, config, ...rest);
  } as typeof original;
  try {
    await fn();
  } finally {
    pg.Client.prototype.query = original;
  }
  return seen;
}
