/** Feeds: the named streams of events inside a project. A project keeps at least one. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, type Project, type User } from '../db/entities.js';
import { Conflict, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { findPage, type PageRequest } from './pagination.js';
import { conflictOn } from './unique.js';

const NAME_TAKEN = {
  feeds_project_name_unique: ['feed_name_taken', 'Another feed of this project already uses this name.'],
} as const satisfies Parameters<typeof conflictOn>[1];

export async function feedNamed(em: EntityManager, project: Project, name: string): Promise<Feed> {
  const feed = await em.findOne(Feed, { project, name });
  if (!feed) throw new NotFound('No feed with this name in this project.');
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

export async function createFeed(em: EntityManager, actor: User, project: Project, input: FeedInput & { name: string }): Promise<Feed> {
  const create = () =>
    em.transactional(async (tx) => {
      const feed = tx.create(Feed, { project, name: input.name, description: input.description ?? null, emoji: input.emoji ?? null, type: input.type ?? 0 });
      recordActivity(tx, project, actor, 'feed.created', { feed: feed.name });
      await tx.flush();
      return feed;
    });
  return conflictOn(create, NAME_TAKEN);
}

export async function updateFeed(em: EntityManager, actor: User, project: Project, name: string, input: FeedInput): Promise<Feed> {
  const update = () =>
    em.transactional(async (tx) => {
      const feed = await feedNamed(tx, project, name);
      const fields = (['name', 'description', 'emoji'] as const).filter((field) => input[field] !== undefined && input[field] !== feed[field]);
      if (input.name !== undefined) feed.name = input.name;
      if (input.description !== undefined) feed.description = input.description;
      if (input.emoji !== undefined) feed.emoji = input.emoji;
      if (fields.length > 0) recordActivity(tx, project, actor, 'feed.updated', { feed: feed.name, fields, ...(fields.includes('name') ? { from: name } : {}) });
      await tx.flush();
      return feed;
    });
  return conflictOn(update, NAME_TAKEN);
}

/**
 * Deletes a feed and its events. The project row is locked first, so two concurrent deletes of a
 * project's last two feeds cannot both see "one other feed left".
 */
export async function deleteFeed(em: EntityManager, actor: User, project: Project, name: string): Promise<void> {
  await em.transactional(async (tx) => {
    // FOR NO KEY UPDATE, not FOR UPDATE: it still serialises feed deletions of one project, but does
    // not block (or deadlock with) an event insert, whose foreign key check takes a KEY SHARE lock.
    await tx.execute('select 1 from projects where id = ? for no key update', [project.id]);
    const feed = await feedNamed(tx, project, name);
    if ((await tx.count(Feed, { project })) <= 1) throw new Conflict('last_feed', 'A project keeps at least one feed.');
    recordActivity(tx, project, actor, 'feed.deleted', { feed: feed.name });
    tx.remove(feed);
    await tx.flush();
  });
}
