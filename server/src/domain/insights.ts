/**
 * Insights: named figures a project keeps an eye on. An increment is an atomic update in the
 * database; concurrent increments of one insight are stored in groups (`incrementInsightBy`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../../spec/generated/openapi.js';
import type { Insight, Project } from '../db/entities.js';
import { sqlStateOf } from '../db/errors.js';
import { databaseKey } from '../db/orm.js';
import type { PageRequest } from '../db/page.js';
import {
  countInsights,
  deleteInsightRow,
  incrementInsightGroup,
  incrementInsightValue,
  insertInsight,
  insightExists,
  insightPage,
  insightValueType,
  updateInsightFields,
  type InsightView,
} from '../db/repositories/insights-rows.js';
import { lockProject, ownTransaction, transaction } from '../db/transaction.js';
import { InvalidRequest, NotFound, projectNotFound } from '../errors.js';
import type { ProjectAccess } from './access.js';
import { queueChange } from '../db/repositories/webhook-outbox.js';
import { recordActivity } from './activity.js';
import type { ChangeShapes } from './change-shapes.js';
import { GroupCommit, type Outcome } from './group-commit.js';
import { refuseAtCap, type Limits } from './limits.js';
import type { Scope } from './scope.js';

export type { InsightView };

const insightNotFound = () => new NotFound('No insight with this id in this project.');
const notANumber = () => InvalidRequest.field('/body/increment', 'applies only to an insight whose value is a number');

/** `POST /v1/projects/{namespace}/insights`'s body. */
export type InsightInput = components['schemas']['CreateInsightRequest'];
/** `PATCH /v1/projects/{namespace}/insights/{insight_id}`'s body: what it leaves out is kept. */
export type InsightChanges = components['schemas']['UpdateInsightRequest'];

/** What the insights module is built with (services.ts). */
export interface InsightsDeps {
  limits: Limits;
  shapes: ChangeShapes;
}

/** A project's insights: add, list, change, remove. The caps and the webhook shapes come with the module. */
export class Insights {
  constructor(private readonly deps: InsightsDeps) {}

  /** Adds an insight; 409 `limit_reached` when the project has as many as it may. */
  async create({ em, caller }: Scope, project: Project, input: InsightInput): Promise<Insight> {
    // Every field of the body is taken here: one the contract adds does not compile until it is.
    const { title, value, emoji, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    return transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      const insights = await countInsights(tx, project.id);
      refuseAtCap(this.deps.limits, 'insightsPerProject', insights, `This project has ${insights} insights`);
      const insight = await insertInsight(tx, project, { title, value, emoji: emoji ?? null });
      recordActivity(tx, { project, actor: caller.user, type: 'insight.created', data: { insight_id: insight.id, title: insight.title } });
      return insight;
    });
  }

  /** The project's insights, newest first. */
  list({ em }: Scope, project: Project, page: PageRequest): Promise<Insight[]> {
    return insightPage(em, project.id, page);
  }

  /**
   * `PATCH …/insights/{insight_id}`: an increment alone goes with its insight's next group
   * (`incrementInsightBy`, which needs neither the caller's nor the project's entity); anything else
   * is `edit`.
   */
  change(scope: Scope, access: ProjectAccess, id: string, changes: InsightChanges): Promise<InsightView> {
    const { title, value, emoji, increment, ...unhandled } = changes;
    const _everyField: Record<string, never> = unhandled;
    if (increment !== undefined && title === undefined && value === undefined && emoji === undefined) {
      return incrementInsightBy(scope, access.projectId, id, increment);
    }
    return this.edit(scope, access.project, id, changes);
  }

  /**
   * Applies the changes in one transaction. `increment` is added by the database in a single
   * statement, so concurrent increments serialise on the row and none is lost. `em` may be in a
   * transaction already (the changes are then part of it).
   */
  async edit({ em, caller }: Scope, project: Project, id: string, changes: InsightChanges): Promise<Insight> {
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
          throw notANumber();
        }
      }
      const insight = await updateInsightFields(tx, project.id, id, { title, value, emoji });
      if (!insight) throw insightNotFound();
      const fields = (['title', 'value', 'emoji', 'increment'] as const).filter((field) => changes[field] !== undefined);
      recordActivity(tx, { project, actor: caller.user, type: 'insight.updated', data: { insight_id: id, fields } });
      await queueChange(tx, project.id, 'insight.updated', this.deps.shapes.insight(insight));
      return insight;
    });
  }

  /**
   * Deletes an insight. Of concurrent deletes of one insight, only the one whose statement removed
   * the row answers 204 and records it.
   */
  async remove({ em, caller }: Scope, project: Project, id: string): Promise<void> {
    await transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'key share');
      const title = await deleteInsightRow(tx, project.id, id);
      if (title === undefined) throw insightNotFound();
      recordActivity(tx, { project, actor: caller.user, type: 'insight.deleted', data: { insight_id: id, title } });
    });
  }
}

/** One request's increment, waiting for its insight's group. */
interface PendingIncrement {
  em: EntityManager;
  projectId: string;
  insightId: string;
  by: number;
  actorId: string | null;
}

/** A bound on one group's statement (its arrays) and on what one transaction holds. */
const MAX_GROUP_INCREMENTS = 1_000;

/**
 * Increments of one insight (per database, project and insight id, in this process) stored in groups
 * (group-commit.ts): the first is stored at once; those arriving meanwhile go together, in arrival
 * order, as the next group, in one statement that is its own transaction (repositories/insights-rows.ts
 * `incrementInsightGroup`). Instances sharing a database need no turn-taking: the statement adds
 * the group's sum to the value as the row holds it.
 */
const increments = new GroupCommit<PendingIncrement, InsightView>(storeIncrements, () => 1, MAX_GROUP_INCREMENTS);

/**
 * Adds `by` (a finite number, the contract's `increment`) to the insight's numeric value and records
 * `insight.updated` (`fields: ["increment"]`) by the caller, as `PATCH …/insights/{insight_id}` with
 * `{ "increment": by }` does. Concurrent increments of one insight are stored together (see
 * `increments`); each answers the insight with the value it made, as if the increments had run one
 * after another in arrival order. 404 when the project (`projectNotFound`) or the insight is gone,
 * 400 at `/body/increment` when the value is not a number. The scope's `em` must not be in a
 * transaction: the group is a transaction of its own.
 */
function incrementInsightBy({ em, caller }: Scope, projectId: string, insightId: string, by: number): Promise<InsightView> {
  const key = `${databaseKey(em)}/${projectId}/${insightId}`;
  return increments.submit(key, { em, projectId, insightId, by, actorId: caller.userId });
}

/**
 * Stores one group (one insight of one project, in arrival order), answering each increment. When
 * nothing was changed, every increment of the group gets the same refusal: the project or the
 * insight is gone, or the value is not a number. When the database refused the statement (an
 * actor's account deleted meanwhile, say), nothing of it was stored: the error goes to GroupCommit,
 * which stores each increment again on its own, so the failure stays with its cause. Any other
 * failure (a lost connection: the statement may have committed) is every increment's, never
 * stored again.
 */
async function storeIncrements(group: PendingIncrement[]): Promise<Outcome<InsightView>[]> {
  const { em, projectId, insightId } = group[0]!;
  let result;
  try {
    result = await ownTransaction(em, (statement) =>
      incrementInsightGroup(statement, projectId, insightId, group, {
        type: 'insight.updated',
        data: { insight_id: insightId, fields: ['increment'] },
      }),
    );
  } catch (error) {
    if (sqlStateOf(error) !== undefined) throw error;
    return group.map(() => ({ ok: false, error }));
  }
  if (result.applied) {
    const { insight, values } = result;
    return values.map((value) => ({ ok: true, value: { ...insight, value } }));
  }
  let refusal = projectNotFound;
  if (result.projectFound) refusal = (await insightValueType(em, projectId, insightId)) === undefined ? insightNotFound : notANumber;
  return group.map(() => ({ ok: false, error: refusal() }));
}
