/**
 * The database snapshot: the row count and an MD5 of the contents of every table, compared before
 * and after a case so that a refused request (4xx) is seen to have changed nothing. What a refusal
 * changes by design is left out: the last-use times a valid credential refreshes, rate-limit
 * counters, and the answer a refused write recorded under its `Idempotency-Key`.
 */
import type { Database } from '../../../server/src/db/orm.js';

/** Columns a valid credential refreshes on use by design (at most once a minute): not a change. */
const VOLATILE_COLUMNS = new Set(['sessions.last_used_at', 'sessions.expires_at', 'api_tokens.last_used_at']);
/** Rate-limit counters count refused requests by design. */
const SKIPPED_TABLES = new Set(['rate_limits']);
/**
 * The rows of a table that are compared, where a refusal leaves others by design: the answer a
 * refused write recorded under its `Idempotency-Key`, which a retry gets again. A claim left
 * behind, or a success, would still show.
 */
const COMPARED_ROWS: Record<string, string> = { idempotency_keys: 'status is null or status < 400' };

export class Snapshotter {
  private query = '';
  constructor(private readonly db: Database) {}

  private async execute<T>(sql: string): Promise<T[]> {
    return this.db.orm.em.fork().getConnection().execute<T[]>(sql);
  }

  private async build(): Promise<void> {
    const columns = await this.execute<{ table_name: string; column_name: string }>(
      `select c.table_name, c.column_name from information_schema.columns c join information_schema.tables t
         on t.table_schema = c.table_schema and t.table_name = c.table_name
       where c.table_schema = 'public' and t.table_type = 'BASE TABLE' order by c.table_name, c.ordinal_position`,
    );
    const byTable = new Map<string, string[]>();
    for (const { table_name: table, column_name: column } of columns) {
      if (SKIPPED_TABLES.has(table) || VOLATILE_COLUMNS.has(`${table}.${column}`)) continue;
      byTable.set(table, [...(byTable.get(table) ?? []), `"${column}"`]);
    }
    this.query = [...byTable.entries()]
      .map(
        ([table, cols]) =>
          `select '${table}' as t, count(*)::int as n, coalesce(md5(string_agg(x::text, E'\\n' order by x::text)), '') as h from (select ` +
          `${cols.join(', ')} from "${table}"${COMPARED_ROWS[table] ? ` where ${COMPARED_ROWS[table]}` : ''}) x`,
      )
      .join(' union all ');
  }

  /** table → "rows:md5". */
  async take(): Promise<Map<string, string>> {
    if (!this.query) await this.build();
    const rows = await this.execute<{ t: string; n: number; h: string }>(this.query);
    return new Map(rows.map((r) => [r.t, `${r.n}:${r.h}`]));
  }

  static diff(before: Map<string, string>, after: Map<string, string>): string[] {
    const changed: string[] = [];
    for (const [table, state] of after) {
      const was = before.get(table);
      if (was !== state)
        changed.push(
          `${table} (rows ${was?.split(':')[0] ?? '?'} → ` +
            `${state.split(':')[0]}${was?.split(':')[0] === state.split(':')[0] ? ', contents changed' : ''})`,
        );
    }
    return changed;
  }
}
