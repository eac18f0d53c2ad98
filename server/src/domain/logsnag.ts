/**
 * LogSnag compatibility: LogSnag's requests mapped onto this service's own rules. Nothing here is a
 * rule of its own but the mapping (project → namespace, channel → feed, icon → emoji, Unix seconds →
 * a timestamp, an insight named by its title) and what LogSnag does implicitly: a feed or an
 * insight created on first use, once however many requests race for it. The rest is the native
 * routes' modules, which this one is built with: Feeds, Events, Insights (whose increments go in
 * groups) and EndUsers.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../../spec/generated/openapi.js';
import type { Insight, Project } from '../db/entities.js';
import { findFeed } from '../db/repositories/events-rows.js';
import { oldestInsightTitled } from '../db/repositories/insights-rows.js';
import { lockProject, transaction } from '../db/transaction.js';
import { InvalidRequest } from '../errors.js';
import type { ProjectAccess } from './access.js';
import type { EndUserRow, EndUsers } from './end-users.js';
import { checkTags, type EventInput, type EventRow, type Events } from './events.js';
import type { Feeds } from './feeds.js';
import type { InsightInput, Insights, InsightView } from './insights.js';
import { within, type Scope } from './scope.js';

/** `POST /v1/log`'s body. */
export type LogSnagLogInput = components['schemas']['LogSnagLogRequest'];
/** `POST /v1/insight`'s body. */
export type LogSnagInsightInput = components['schemas']['LogSnagInsightRequest'];
/** `PATCH /v1/insight`'s body. */
export type LogSnagIncrementInput = components['schemas']['LogSnagInsightIncrementRequest'];
/** `POST /v1/identify`'s body. */
export type LogSnagIdentifyInput = components['schemas']['LogSnagIdentifyRequest'];

/** LogSnag's Unix seconds as the native routes' timestamp. */
function fromUnixSeconds(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}

/** The native routes' modules LogSnag's requests are mapped onto (services.ts builds them). */
export interface LogSnagDeps {
  events: Events;
  feeds: Feeds;
  insights: Insights;
  endUsers: EndUsers;
}

/** LogSnag's four requests, each as the native route it maps onto. */
export class LogSnag {
  constructor(private readonly deps: LogSnagDeps) {}

  /** `POST /v1/log`: the event published to its channel's feed, made on first use, through the service's one publisher. */
  async log(scope: Scope, project: Project, input: LogSnagLogInput): Promise<EventRow> {
    // Every field of the body is mapped here: one the contract adds does not compile until it is.
    // `project` chose the project; `parser` only says how LogSnag renders the description.
    const { project: _project, channel, event, description, icon, tags, timestamp, user_id, notify, parser: _parser, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    const publication: EventInput = {
      event,
      ...(description !== undefined ? { description } : {}),
      ...(icon !== undefined ? { emoji: icon } : {}),
      ...(tags !== undefined ? { tags } : {}),
      ...(timestamp !== undefined ? { timestamp: fromUnixSeconds(timestamp) } : {}),
      ...(user_id !== undefined ? { user_id } : {}),
      ...(notify !== undefined ? { notify } : {}),
    };
    // The publication's own checks first (the publisher repeats them): an event it refuses makes no feed.
    checkTags(tags ?? {});
    await this.feedOnFirstUse(scope, project, channel);
    return this.deps.events.publish(scope, project, channel, publication);
  }

  /**
   * `POST /v1/insight`: sets the value (and, when given, the emoji) of the insight with this title,
   * as `PATCH …/insights/{id}` does (`insight.updated`), or creates it (`insight.created`).
   */
  setInsight(scope: Scope, project: Project, input: LogSnagInsightInput): Promise<Insight> {
    const { project: _project, title, value, icon, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    const emoji = icon !== undefined ? { emoji: icon } : {};
    return this.insightTitled(scope, project, { title, value, ...emoji }, (tx, found) =>
      this.deps.insights.edit(within(scope, tx), project, found.id, { value, ...emoji }),
    );
  }

  /**
   * `PATCH /v1/insight`: adds `value.$inc` to the insight with this title as `PATCH …/insights/{id}`
   * with `increment` does (`Insights.change`: an increment alone goes with the insight's next group
   * of concurrent increments; `insight.updated`), after creating the insight at 0 when the project
   * has none by that title (`insight.created`). `icon` goes with the increment only when it changes
   * the emoji. A value that is not a number is 400, pointed at `/body/value/$inc`.
   */
  async incrementInsight(scope: Scope, access: ProjectAccess, input: LogSnagIncrementInput): Promise<InsightView> {
    const { project: _project, title, value, icon, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    const create = { title, value: 0, ...(icon !== undefined ? { emoji: icon } : {}) };
    const insight = await this.insightTitled(scope, access.project, create, (_tx, found) => Promise.resolve(found));
    const emoji = icon !== undefined && icon !== insight.emoji ? { emoji: icon } : {};
    try {
      return await this.deps.insights.change(scope, access, insight.id, { increment: value.$inc, ...emoji });
    } catch (error) {
      if (error instanceof InvalidRequest && error.details?.[0]?.path === '/body/increment') {
        throw InvalidRequest.field('/body/value/$inc', error.details[0].message);
      }
      throw error;
    }
  }

  /** `POST /v1/identify`: `PUT /v1/projects/{namespace}/users/{user_id}` with the project and the end user in the body. */
  identify(scope: Scope, project: Project, input: LogSnagIdentifyInput): Promise<EndUserRow> {
    const { project: _project, user_id, properties, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    return this.deps.endUsers.record(scope, project, user_id, { properties });
  }

  /**
   * Makes sure the project has the feed `name`: when it does not, creates it as `POST …/feeds` does
   * (`Feeds.create`: the cap, the `feed.created` activity), inside a transaction that holds the
   * project's row FOR NO KEY UPDATE and looks for the feed again first. Concurrent first uses of a
   * name queue on that lock, and all but the first find the feed the first made.
   */
  private async feedOnFirstUse(scope: Scope, project: Project, name: string): Promise<void> {
    if (await findFeed(scope.em, project.id, name)) return;
    await transaction(scope.em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      if (await findFeed(tx, project.id, name)) return;
      await this.deps.feeds.create(within(scope, tx), project, { name });
    });
  }

  /**
   * The project's insight titled `create.title` (the oldest, when the native routes made several),
   * or one made with `create` as `POST …/insights` makes it (`Insights.create`: the cap,
   * `insight.created`); then `then` runs on the insight found, in the same transaction. The
   * project's row is held FOR NO KEY UPDATE from before the search, so concurrent first uses of a
   * title make one insight.
   */
  private insightTitled<T>(
    scope: Scope,
    project: Project,
    create: InsightInput,
    then: (tx: EntityManager, found: Insight) => Promise<T>,
  ): Promise<T | Insight> {
    return transaction(scope.em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      const found = await oldestInsightTitled(tx, project.id, create.title);
      return found ? then(tx, found) : this.deps.insights.create(within(scope, tx), project, create);
    });
  }
}
