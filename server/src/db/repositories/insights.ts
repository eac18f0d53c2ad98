/**
 * The insights aggregate: every read and write of `insights` (docs/development.md, Layers).
 * MikroORM's unit of work creates, loads and changes them; two statements are written out because
 * a filter object cannot say them: the atomic increment, and the delete that names what it removed.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Insight, type InsightValue, type Project } from '../entities.js';
import { findPage, type PageRequest } from '../page.js';
import { query } from '../raw.js';

/** How many insights the project has. */
export function countInsights(em: EntityManager, projectId: string): Promise<number> {
  return em.count(Insight, { project: projectId });
}

/** Whether the project has the insight `id`. */
export async function insightExists(em: EntityManager, projectId: string, id: string): Promise<boolean> {
  return (await em.count(Insight, { id, project: projectId })) > 0;
}

/**
 * The project's oldest insight titled `title` (ids are UUID v7, so the lowest id is the oldest), or
 * null. Titles need not be unique: the native routes may have made several.
 */
export function oldestInsightTitled(em: EntityManager, projectId: string, title: string): Promise<Insight | null> {
  return em.findOne(Insight, { project: projectId, title }, { orderBy: { id: 'asc' } });
}

/** A new insight of the project, written at once. */
export async function insertInsight(
  em: EntityManager,
  project: Project,
  fields: { title: string; value: InsightValue; emoji: string | null },
): Promise<Insight> {
  const insight = em.create(Insight, { project, ...fields });
  await em.flush();
  return insight;
}

/** A page of the project's insights, newest first. */
export function insightPage(em: EntityManager, projectId: string, page: PageRequest): Promise<Insight[]> {
  return findPage(em, Insight, { project: projectId }, page);
}

/**
 * Sets what is given of the insight's title, value and emoji on the insight read afresh (so that an
 * increment just made shows), written at once: the insight as stored, or null when the project has
 * no such insight.
 */
export async function updateInsightFields(
  em: EntityManager,
  projectId: string,
  id: string,
  changes: { title?: string; value?: InsightValue; emoji?: string | null },
): Promise<Insight | null> {
  const insight = await em.findOne(Insight, { id, project: projectId }, { refresh: true });
  if (!insight) return null;
  if (changes.title !== undefined) insight.title = changes.title;
  if (changes.value !== undefined) insight.value = changes.value;
  if (changes.emoji !== undefined) insight.emoji = changes.emoji;
  await em.flush();
  return insight;
}

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
