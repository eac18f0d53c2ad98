/**
 * Hand-written statements (domain/rows.ts says which and why), sent straight to a pg connection of
 * MikroORM's pool: the request's transaction's connection when one is open, else one taken from
 * the pool for this statement alone.
 *
 * On PostgreSQL they go as named prepared statements: each pooled connection parses and plans a
 * statement once and then only binds and executes it. For the project read, planning its
 * statement (joins and two aggregates) took longer than running it. Anything that pools
 * connections between the service and PostgreSQL must then keep prepared statements per client
 * (PgBouncer's transaction mode needs `max_prepared_statements`, 1.21+). The embedded database
 * gets unnamed statements: PGlite is a single session that outlives a reconnecting client, which
 * would then prepare a name that already exists.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';

interface PgConnection {
  query<T>(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: T[] }>;
}

/** knex's client: the pool's, or a transaction's, whose `acquireConnection` answers the transaction's connection. */
interface ConnectionSource {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): unknown;
}

const prepared = new WeakSet<object>();

/** Statements of this ORM's connections are prepared once per connection (PostgreSQL only). */
export function usePreparedStatements(orm: MikroORM): void {
  prepared.add(orm.em.getConnection().getKnex());
}

interface Statement {
  name: string;
  text: string;
}

const statements = new Map<string, Statement>();

/** `?` placeholders become `$1…`, once per distinct SQL text, which also names the prepared statement. */
function statement(sql: string): Statement {
  let found = statements.get(sql);
  if (!found) {
    let n = 0;
    found = { name: `sb_${statements.size + 1}`, text: sql.replace(/\?/g, () => `$${++n}`) };
    statements.set(sql, found);
  }
  return found;
}

/**
 * Runs `sql` with `params`: `?` marks a parameter (so the SQL itself must not contain a `?`), and an
 * array is one parameter, e.g. `?::uuid[]`.
 */
export async function query<T = Record<string, unknown>>(em: EntityManager, sql: string, params: unknown[]): Promise<T[]> {
  const knex = em.getConnection().getKnex();
  const source = ((em.getTransactionContext() as { client?: ConnectionSource } | undefined) ?? knex).client as ConnectionSource;
  const { name, text } = statement(sql);
  const connection = await source.acquireConnection();
  try {
    return (await connection.query<T>({ name: prepared.has(knex) ? name : undefined, text, values: params })).rows;
  } finally {
    source.releaseConnection(connection);
  }
}
