/** Insights: named figures a project keeps an eye on. An increment is one atomic update in the database. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Insight, type InsightValue, type Project, type User } from '../db/entities.js';
import { InvalidRequest, NotFound } from '../errors.js';
import { deleteInsightRow, incrementInsightValue } from '../db/queries/insights.js';
import { recordActivity } from './activity.js';
import { refuseAtCap, type Limits } from './limits.js';
import { findPage, type PageRequest } from '../db/page.js';
import { lockProject, transaction } from '../db/transaction.js';

const insightNotFound = () => new NotFound('No insight with this id in this project.');

/** Adds an insight; 409 `limit_reached` when the project has as many as it may. */
export async function createInsight(
  em: EntityManager,
  actor: User,
  project: Project,
  input: { title: string; value: InsightValue; emoji?: string | null | undefined },
  limits: Limits,
): Promise<Insight> {
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'no key update');
    const insights = await tx.count(Insight, { project });
    refuseAtCap(limits, 'insightsPerProject', insights, `This project has ${insights} insights`);
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
 * statement, so concurrent increments serialise on the row and none is lost.
 */
export async function updateInsight(
  em: EntityManager,
  actor: User,
  project: Project,
  id: string,
  changes: InsightChanges,
): Promise<Insight> {
  if (changes.increment !== undefined && changes.value !== undefined) {
    throw InvalidRequest.field('/body/increment', 'cannot be combined with value');
  }
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    if (changes.increment !== undefined) {
      const incremented = await incrementInsightValue(tx, project.id, id, changes.increment);
      if (!incremented) {
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

/**
 * Deletes an insight. Of concurrent deletes of one insight, only the one whose statement removed
 * the row answers 204 and records it.
 */
export async function deleteInsight(em: EntityManager, actor: User, project: Project, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    const title = await deleteInsightRow(tx, project.id, id);
    if (title === undefined) throw insightNotFound();
    recordActivity(tx, project, actor, 'insight.deleted', { insight_id: id, title });
    await tx.flush();
  });
}
