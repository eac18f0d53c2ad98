/** Insights: named figures a project keeps an eye on. An increment is one atomic update in the database. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../../spec/generated/openapi.js';
import type { Insight, Project, User } from '../db/entities.js';
import type { PageRequest } from '../db/page.js';
import {
  countInsights,
  deleteInsightRow,
  incrementInsightValue,
  insertInsight,
  insightExists,
  insightPage,
  updateInsightFields,
} from '../db/repositories/insights.js';
import { lockProject, transaction } from '../db/transaction.js';
import { InvalidRequest, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { refuseAtCap, type Limits } from './limits.js';

const insightNotFound = () => new NotFound('No insight with this id in this project.');

/** `POST /v1/projects/{namespace}/insights`'s body. */
export type InsightInput = components['schemas']['CreateInsightRequest'];
/** `PATCH /v1/projects/{namespace}/insights/{insight_id}`'s body: what it leaves out is kept. */
export type InsightChanges = components['schemas']['UpdateInsightRequest'];

/** Adds an insight; 409 `limit_reached` when the project has as many as it may. */
export async function addInsight(em: EntityManager, actor: User, project: Project, input: InsightInput, limits: Limits): Promise<Insight> {
  // Every field of the body is taken here: one the contract adds does not compile until it is.
  const { title, value, emoji, ...unhandled } = input;
  const _everyField: Record<string, never> = unhandled;
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'no key update');
    const insights = await countInsights(tx, project.id);
    refuseAtCap(limits, 'insightsPerProject', insights, `This project has ${insights} insights`);
    const insight = await insertInsight(tx, project, { title, value, emoji: emoji ?? null });
    recordActivity(tx, project, actor, 'insight.created', { insight_id: insight.id, title: insight.title });
    return insight;
  });
}

/** The project's insights, newest first. */
export async function insightsOf(em: EntityManager, project: Project, page: PageRequest): Promise<Insight[]> {
  return insightPage(em, project.id, page);
}

/**
 * Applies the changes in one transaction. `increment` is added by the database in a single
 * statement, so concurrent increments serialise on the row and none is lost.
 */
export async function editInsight(em: EntityManager, actor: User, project: Project, id: string, changes: InsightChanges): Promise<Insight> {
  const { title, value, emoji, increment, ...unhandled } = changes;
  const _everyField: Record<string, never> = unhandled;
  if (increment !== undefined && value !== undefined) {
    throw InvalidRequest.field('/body/increment', 'cannot be combined with value');
  }
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    if (increment !== undefined) {
      const incremented = await incrementInsightValue(tx, project.id, id, increment);
      if (!incremented) {
        if (!(await insightExists(tx, project.id, id))) throw insightNotFound();
        throw InvalidRequest.field('/body/increment', 'applies only to an insight whose value is a number');
      }
    }
    const insight = await updateInsightFields(tx, project.id, id, { title, value, emoji });
    if (!insight) throw insightNotFound();
    const fields = (['title', 'value', 'emoji', 'increment'] as const).filter((field) => changes[field] !== undefined);
    recordActivity(tx, project, actor, 'insight.updated', { insight_id: id, fields });
    return insight;
  });
}

/**
 * Deletes an insight. Of concurrent deletes of one insight, only the one whose statement removed
 * the row answers 204 and records it.
 */
export async function removeInsight(em: EntityManager, actor: User, project: Project, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    const title = await deleteInsightRow(tx, project.id, id);
    if (title === undefined) throw insightNotFound();
    recordActivity(tx, project, actor, 'insight.deleted', { insight_id: id, title });
  });
}
