/** The statements of insights a count or a filter object cannot say: the atomic increment and the delete that names what it removed. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

const INCREMENT = `update insights set value = to_jsonb((value #>> '{}')::numeric + ?::numeric), updated_at = now()
  where id = ? and project_id = ? and jsonb_typeof(value) = 'number'
  returning true as is_number`;

/**
 * Adds `by` to the insight's value in one statement, so concurrent increments serialise on the row
 * and none is lost. False when the project has no such insight or its value is not a number.
 */
export async function incrementInsightValue(tx: EntityManager, projectId: string, id: string, by: number): Promise<boolean> {
  return (await query(tx, INCREMENT, [by, id, projectId])).length > 0;
}

const DELETE = 'delete from insights where id = ? and project_id = ? returning title';

/** Deletes the insight and answers its title; undefined when the project has no such insight (any more). */
export async function deleteInsightRow(tx: EntityManager, projectId: string, id: string): Promise<string | undefined> {
  const [deleted] = await query<{ title: string }>(tx, DELETE, [id, projectId]);
  return deleted?.title;
}
