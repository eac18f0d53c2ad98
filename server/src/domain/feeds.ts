/** Feeds: the named streams of events inside a project. A project keeps at least one. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../../spec/generated/openapi.js';
import type { Feed, Project } from '../db/entities.js';
import type { PageRequest } from '../db/page.js';
import { countFeeds, deleteFeedRow, feedPage, findFeed, insertFeed, updateFeedFields } from '../db/repositories/events-rows.js';
import { lockProject, transaction } from '../db/transaction.js';
import { conflictOn } from '../db/unique.js';
import { Conflict, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { refuseAtCap, type Limits } from './limits.js';
import type { Scope } from './scope.js';

const NAME_TAKEN = {
  feeds_project_name_unique: ['feed_name_taken', 'Another feed of this project already uses this name.'],
} as const satisfies Parameters<typeof conflictOn>[1];

export const feedNotFound = () => new NotFound('No feed with this name in this project.');

/** The project's feed of that name; 404 `not_found` when it has none. */
export async function feedNamed(em: EntityManager, projectId: string, name: string): Promise<Feed> {
  const feed = await findFeed(em, projectId, name);
  if (!feed) throw feedNotFound();
  return feed;
}

/** `POST /v1/projects/{namespace}/feeds`'s body. */
export type FeedInput = components['schemas']['CreateFeedRequest'];
/** `PATCH /v1/projects/{namespace}/feeds/{feed}`'s body: what it leaves out is kept. */
export type FeedChanges = components['schemas']['UpdateFeedRequest'];

/** A project's feeds: list, add, rename, remove. The cap on feeds comes with the module. */
export class Feeds {
  constructor(private readonly deps: { limits: Limits }) {}

  /** The project's feeds, newest first. */
  list({ em }: Scope, project: Project, page: PageRequest): Promise<Feed[]> {
    return feedPage(em, project.id, page);
  }

  /** Adds a feed; 409 `limit_reached` when the project has as many as it may. */
  async create({ em, caller }: Scope, project: Project, input: FeedInput): Promise<Feed> {
    // Every field of the body is taken here: one the contract adds does not compile until it is.
    const { name, description, emoji, type, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    const create = () =>
      transaction(em, async (tx) => {
        await lockProject(tx, project.id, 'no key update');
        const feeds = await countFeeds(tx, project.id);
        refuseAtCap(this.deps.limits, 'feedsPerProject', feeds, `This project has ${feeds} feeds`);
        const feed = await insertFeed(tx, project, { name, description: description ?? null, emoji: emoji ?? null, type: type ?? 0 });
        recordActivity(tx, { project, actor: caller.user, type: 'feed.created', data: { feed: feed.name } });
        return feed;
      });
    return conflictOn(create, NAME_TAKEN);
  }

  /** Renames or redescribes the feed `name`; what `input` leaves out is kept. */
  async edit({ em, caller }: Scope, project: Project, name: string, input: FeedChanges): Promise<Feed> {
    const { name: newName, description, emoji, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    const update = () =>
      transaction(em, async (tx) => {
        await lockProject(tx, project.id, 'key share');
        const feed = await feedNamed(tx, project.id, name);
        const fields = (['name', 'description', 'emoji'] as const).filter(
          (field) => input[field] !== undefined && input[field] !== feed[field],
        );
        await updateFeedFields(tx, feed, { name: newName, description, emoji });
        if (fields.length > 0)
          recordActivity(tx, {
            project,
            actor: caller.user,
            type: 'feed.updated',
            data: {
              feed: feed.name,
              fields,
              ...(fields.includes('name') ? { from: name } : {}),
            },
          });
        return feed;
      });
    return conflictOn(update, NAME_TAKEN);
  }

  /**
   * Deletes a feed and its events. The project row is locked FOR NO KEY UPDATE first, so feed deletes
   * of one project run one at a time: two concurrent deletes of its last two feeds cannot both see
   * "one other feed left", and of two deletes of one feed only the first finds it. The mode still
   * admits event inserts, whose foreign key checks take KEY SHARE.
   */
  async remove({ em, caller }: Scope, project: Project, name: string): Promise<void> {
    await transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      const feed = await feedNamed(tx, project.id, name);
      if ((await countFeeds(tx, project.id)) <= 1) throw new Conflict('last_feed', 'A project keeps at least one feed.');
      if (!(await deleteFeedRow(tx, feed.id))) throw feedNotFound();
      recordActivity(tx, { project, actor: caller.user, type: 'feed.deleted', data: { feed: feed.name } });
    });
  }
}
