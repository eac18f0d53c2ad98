/**
 * Hand-written SQL for the statements every request runs: the credential behind a token, the
 * project a route names with the caller's membership (policies/project.ts), a project's members and
 * feeds, an activity page.
 *
 * MikroORM spends about 1–3 ms of CPU building, compiling and hydrating each `find` (profiled in
 * BENCHMARKS.md), several times the cost of the statement itself. These few hot statements are
 * written by hand (run by db/sql.ts), with the helpers here. Rows the request may change (the caller, the project)
 * become the same managed entity `find` would have made, merged into the identity map (`mapRow`);
 * rows an answer only shows stay plain values (domain/projects.ts, domain/activity.ts).
 *
 * Column lists come from the entity metadata, so a column added to an entity is selected here too.
 */
import type { EntityManager, EntityName } from '@mikro-orm/postgresql';

const columnLists = new Map<string, string[]>();

/** The entity's own columns (no collections), as database field names. */
function columns<T extends object>(em: EntityManager, entity: EntityName<T>): string[] {
  const meta = em.getMetadata(entity);
  let list = columnLists.get(meta.className);
  if (!list) {
    list = meta.props.filter((prop) => prop.persist !== false && prop.fieldNames?.length).flatMap((prop) => prop.fieldNames);
    columnLists.set(meta.className, list);
  }
  return list;
}

const selectLists = new Map<string, string>();

/** `alias."col" as "prefix__col", …` for every column of `entity`, built once per entity, alias and prefix (hot path). */
export function selectColumns<T extends object>(em: EntityManager, entity: EntityName<T>, alias: string, prefix: string): string {
  const key = `${em.getMetadata(entity).className}\u0000${alias}\u0000${prefix}`;
  let list = selectLists.get(key);
  if (list === undefined) {
    list = columns(em, entity).map((column) => `${alias}."${column}" as "${prefix}__${column}"`).join(', ');
    selectLists.set(key, list);
  }
  return list;
}

/** The columns of `row` selected with `prefix`, by their own names: the raw data `em.map` takes. */
function columnsOfPrefix<T extends object>(em: EntityManager, entity: EntityName<T>, row: Record<string, unknown>, prefix: string): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const column of columns(em, entity)) data[column] = row[`${prefix}__${column}`];
  return data;
}

/**
 * The managed entity for the `prefix`-ed columns of `row`: what `em.map` does, without cascading
 * the merge over relations or re-validating what the database just returned (a quarter cheaper).
 */
export function mapRow<T extends object>(em: EntityManager, entity: EntityName<T>, row: Record<string, unknown>, prefix: string): T {
  const data = em.getDriver().mapResult(columnsOfPrefix(em, entity, row, prefix) as never, em.getMetadata(entity));
  return em.merge(entity, data as never, { convertCustomTypes: true, refresh: true, cascade: false, validate: false });
}
