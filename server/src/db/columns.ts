/**
 * Hand-written statements whose columns the compiler checks. A row type is written once; each
 * statement that reads or writes it takes an object with one entry per field of that type (a mapped
 * type, every key required and no other allowed), and the SQL and its parameters are both built from
 * that one object. A field added to the row type and not to a statement's columns, or the reverse,
 * is a compile error; and a statement's list of columns and its parameters cannot fall out of order.
 *
 * - `rowReader` reads rows: each field is an SQL expression (`as "field"`, so rows arrive with the
 *   type's own names), a timestamp one wrapped in `time(…)` and parsed into a Date.
 * - `unnestRows` and `unnestInsert` write many rows in one statement: one array parameter per
 *   column (`unnest(?::uuid[], ?::text[], …)`), so the statement's text and its number of
 *   parameters are the same whatever the number of rows (it is prepared once, raw.ts).
 *
 * Invariant: every text here is built once, at import; none depends on the rows.
 */

/** A timestamp column, read as ISO 8601 text whatever the connection's type parsers do, then parsed. */
export interface TimeColumn {
  readonly time: string;
}

/** `expression` (a timestamptz) read into a Date field. */
export function time(expression: string): TimeColumn {
  return { time: expression };
}

/** How a field of type V is read: an SQL expression, or for a Date, a `time(…)`. */
export type ReadColumn<V> = [V] extends [Date | null] ? TimeColumn : string;

/** One read column per field of R. */
export type ReadColumns<R> = { readonly [K in keyof R]-?: ReadColumn<R[K]> };

export interface RowReader<R> {
  /** The select list: `expression as "field", …`. */
  readonly select: string;
  /** A row the select list produced, as R (its timestamps parsed; the row object is reused). */
  read(row: Record<string, unknown>): R;
}

/** The select list and row reading of `columns`: one entry per field of R. */
export function rowReader<R>(columns: ReadColumns<R>): RowReader<R> {
  const entries = Object.entries<string | TimeColumn>(columns);
  const times = entries.filter(([, column]) => typeof column !== 'string').map(([field]) => field);
  const select = entries
    .map(([field, column]) => `${typeof column === 'string' ? column : `to_json(${column.time}) #>> '{}'`} as "${field}"`)
    .join(', ');
  return {
    select,
    read(row) {
      for (const field of times) {
        const value = row[field];
        if (typeof value === 'string') row[field] = new Date(value);
      }
      return row as R;
    },
  };
}

/** The SQL types a field of type V may be written as (an array of it is the parameter). */
export type SqlType<V> = [NonNullable<V>] extends [boolean]
  ? 'boolean'
  : [NonNullable<V>] extends [Date]
    ? 'timestamptz'
    : [NonNullable<V>] extends [number]
      ? 'int' | 'bigint' | 'numeric' | 'float8'
      : [NonNullable<V>] extends [string]
        ? 'uuid' | 'text'
        : 'jsonb';

/** One written column per field of R: the column's name and its SQL type. */
export type WriteColumns<R> = { readonly [K in keyof R]-?: readonly [column: string, type: SqlType<R[K]>] };

/**
 * Reads `field` of a row as its parameter holds it: JSON as text and a Date as ISO 8601 (drivers
 * serialise these inside arrays each their own way), anything else as it is.
 */
function fieldWriter(field: string, type: string): (row: unknown) => unknown {
  const get = (row: unknown) => (row as Record<string, unknown>)[field];
  if (type === 'jsonb') {
    return (row) => {
      const value = get(row);
      return value === null || value === undefined ? null : JSON.stringify(value);
    };
  }
  if (type === 'timestamptz') {
    return (row) => {
      const value = get(row);
      return value instanceof Date ? value.toISOString() : value;
    };
  }
  return get;
}

function entriesOf(columns: object): { field: string; column: string; type: string; write: (row: unknown) => unknown }[] {
  return (Object.entries(columns) as [string, readonly [string, string]][]).map(([field, [column, type]]) => ({
    field,
    column,
    type,
    write: fieldWriter(field, type),
  }));
}

export interface UnnestRows<R> {
  /** The columns' names, in the order of the arrays. */
  readonly columns: string;
  /** `unnest(?::type[], …) as alias(column, …)`: a row source of R's columns. */
  readonly source: string;
  /** The arrays, one per column in the same order: the parameters of `source`. */
  params(rows: readonly R[]): unknown[][];
}

/** Rows as one array parameter per column, for a statement that reads them (`from ${source}`). */
export function unnestRows<R>(alias: string, columns: WriteColumns<R>): UnnestRows<R> {
  const entries = entriesOf(columns);
  const names = entries.map((e) => e.column).join(', ');
  return {
    columns: names,
    source: `unnest(${entries.map((e) => `?::${e.type}[]`).join(', ')}) as ${alias}(${names})`,
    params: (rows) => entries.map((e) => rows.map(e.write)),
  };
}

export interface UnnestInsert<R, S> {
  /** `insert into table (columns) select ?, …, v.* from unnest(…) as v(…)`; a statement may add `returning`, or put it in a CTE. */
  readonly sql: string;
  /** The parameters: `shared`'s values, then the rows' arrays. */
  params(rows: readonly R[], shared: S): unknown[];
}

/**
 * The insert of many rows of `table` in one statement: a row's fields are `columns` (one array
 * parameter each); `sharedColumns` are the same for every row (one parameter each), such as the
 * project every event of a group belongs to.
 */
export function unnestInsert<R, S = Record<never, never>>(
  table: string,
  columns: WriteColumns<R>,
  sharedColumns: WriteColumns<S> = {} as WriteColumns<S>,
): UnnestInsert<R, S> {
  const rows = unnestRows('v', columns);
  const shared = entriesOf(sharedColumns);
  const names = [...shared.map((e) => e.column), rows.columns].join(', ');
  const values = [...shared.map((e) => `?::${e.type}`), 'v.*'].join(', ');
  return {
    sql: `insert into ${table} (${names}) select ${values} from ${rows.source}`,
    params: (list, sharedRow) => [...shared.map((e) => e.write(sharedRow)), ...rows.params(list)],
  };
}
