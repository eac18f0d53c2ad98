/** Feeds: the named streams of events inside a project. A project keeps at least one. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, type Project, type User } from '../db/entities.js';
import { Conflict, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { refuseAtCap, type Limits } from './limits.js';
import { findPage, type PageRequest } from '../db/page.js';
import { lockProject, transaction } from '../db/transaction.js';
import { conflictOn } from '../db/unique.js';

const NAME_TAKEN = {
  feeds_project_name_unique: ['feed_name_taken', 'Another feed of this project already uses this name.'],
} as const satisfies Parameters<typeof conflictOn>[1];

export const feedNotFound = () => new NotFound('No feed with this name in this project.');

export async function feedNamed(em: EntityManager, project: Project, name: string): Promise<Feed> {
  const feed = await em.findOne(Feed, { project, name });
  if (!feed) throw feedNotFound();
  return feed;
}

export async function listFeeds(em: EntityManager, project: Project, page: PageRequest): Promise<Feed[]> {
  return findPage(em, Feed, { project }, page);
}

export interface FeedInput {
  name?: string | undefined;
  description?: string | null | undefined;
  emoji?: string | null | undefined;
  type?: number | undefined;
}

/** Adds a feed; 409 `limit_reached` when the project has as many as it may. */
export async function createFeed(
  em: EntityManager,
  actor: User,
  project: Project,
  input: FeedInput & { name: string },
  limits: Limits,
): Promise<Feed> {
  const create = () =>
    transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      const feeds = await tx.count(Feed, { project });
      refuseAtCap(limits, 'feedsPerProject', feeds, `This project has ${feeds} feeds`);
      const feed = tx.create(Feed, {
        project,
        name: input.name,
        description: input.description ?? null,
        emoji: input.emoji ?? null,
        type: input.type ?? 0,
      });
      recordActivity(tx, project, actor, 'feed.created', { feed: feed.name });
      await tx.flush();
      return feed;
    });
  return conflictOn(create, NAME_TAKEN);
}

export async function updateFeed(em: EntityManager, actor: User, project: Project, name: string, input: FeedInput): Promise<Feed> {
  const update = () =>
    transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'key share');
      const feed = await feedNamed(tx, project, name);
      const fields = (['name', 'description', 'emoji'] as const).filter(
        (field) => input[field] !== undefined && input[field] !== feed[field],
      );
      if (input.name !== undefined) feed.name = input.name;
      if (input.description !== undefined) feed.description = input.description;
      if (input.emoji !== undefined) feed.emoji = input.emoji;
      if (fields.length > 0)
        recordActivity(tx, project, actor, 'feed.updated', { feed: feed.name, fields, ...(fields.includes('name') ? { from: name } : {}) });
      await tx.flush();
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
export async function deleteFeed(em: EntityManager, actor: User, project: Project, name: string): Promise<void> {
  await transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'no key update');
    const feed = await feedNamed(tx, project, name);
    if ((await tx.count(Feed, { project })) <= 1) throw new Conflict('last_feed', 'A project keeps at least one feed.');
    if ((await tx.nativeDelete(Feed, { id: feed.id })) === 0) throw feedNotFound();
    recordActivity(tx, project, actor, 'feed.deleted', { feed: feed.name });
    await tx.flush();
  });
}
