/** Insights: named figures a project keeps an eye on. An increment is one atomic SQL update. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Insight, type InsightValue, type Project, type User } from '../db/entities.js';
import { InvalidRequest, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { findPage, type PageRequest } from './pagination.js';

const insightNotFound = () => new NotFound('No insight with this id in this project.');

export async function createInsight(
  em: EntityManager,
  actor: User,
  project: Project,
  input: { title: string; value: InsightValue; emoji?: string | null | undefined },
): Promise<Insight> {
  return em.transactional(async (tx) => {
    const insight = tx.create(Insight, { project, title: input.title, value: input.value, emoji: input.emoji ?? null });
    recordActivity(tx, project, actor, 'insight.created', { insight_id: insight.id, title: insight.title });
    await tx.flush();
    return insight;
  });
}

export async function listInsights(em: EntityManager, project: Project, page: PageRequest): Promise<Insight[]> {
  return findPage(em, Insight, { project }, page);
}

export interface InsightChanges {
  title?: string | undefined;
  value?: InsightValue | undefined;
  emoji?: string | null | undefined;
  increment?: number | undefined;
}

/**
 * Applies the changes in one transaction. `increment` is added by the database in a single
 * `update … set value = value + n`, so concurrent increments serialise on the row and none is lost.
 */
export async function updateInsight(em: EntityManager, actor: User, project: Project, id: string, changes: InsightChanges): Promise<Insight> {
  if (changes.increment !== undefined && changes.value !== undefined) {
    throw InvalidRequest.field('/body/increment', 'cannot be combined with value');
  }
  return em.transactional(async (tx) => {
    if (changes.increment !== undefined) {
      const [row] = await tx.getConnection().execute<{ is_number: boolean }[]>(
        `update insights set value = to_jsonb((value #>> '{}')::numeric + ?::numeric), updated_at = now()
         where id = ? and project_id = ? and jsonb_typeof(value) = 'number'
         returning true as is_number`,
        [changes.increment, id, project.id],
        'all',
        tx.getTransactionContext(),
      );
      if (!row) {
        if (!(await tx.count(Insight, { id, project }))) throw insightNotFound();
        throw InvalidRequest.field('/body/increment', 'applies only to an insight whose value is a number');
      }
    }
    const insight = await tx.findOne(Insight, { id, project }, { refresh: true });
    if (!insight) throw insightNotFound();
    if (changes.title !== undefined) insight.title = changes.title;
    if (changes.value !== undefined) insight.value = changes.value;
    if (changes.emoji !== undefined) insight.emoji = changes.emoji;
    const fields = (['title', 'value', 'emoji', 'increment'] as const).filter((field) => changes[field] !== undefined);
    recordActivity(tx, project, actor, 'insight.updated', { insight_id: id, fields });
    await tx.flush();
    return insight;
  });
}

export async function deleteInsight(em: EntityManager, actor: User, project: Project, id: string): Promise<void> {
  await em.transactional(async (tx) => {
    const insight = await tx.findOne(Insight, { id, project });
    if (!insight) throw insightNotFound();
    recordActivity(tx, project, actor, 'insight.deleted', { insight_id: id, title: insight.title });
    tx.remove(insight);
    await tx.flush();
  });
}
