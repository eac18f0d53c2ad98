/** Events: published by the user's own code to a feed, read back newest first. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Event, Feed, type Project, type TagValue } from '../db/entities.js';
import { InvalidRequest } from '../errors.js';
import { feedNamed } from './feeds.js';
import { decodeCursor, type PageRequest } from './pagination.js';

const MAX_TAGS = 20;
const TAG_KEY = /^[a-z0-9-]{1,32}$/;

export interface EventInput {
  event: string;
  description?: string | null | undefined;
  emoji?: string | null | undefined;
  tags?: Record<string, TagValue> | undefined;
  timestamp?: string | undefined;
}

/** The limits of API.md §5b that the contract cannot express: the number of tags and their keys. */
function checkTags(tags: Record<string, TagValue>): void {
  const keys = Object.keys(tags);
  if (keys.length > MAX_TAGS) throw InvalidRequest.field('/body/tags', `must have at most ${MAX_TAGS} tags`);
  const bad = keys.find((key) => !TAG_KEY.test(key));
  if (bad !== undefined) throw InvalidRequest.field(`/body/tags/${bad}`, 'must be a key of 1–32 lower-case letters, digits and hyphens');
}

export async function publishEvent(em: EntityManager, project: Project, feedName: string, input: EventInput): Promise<Event> {
  const tags = input.tags ?? {};
  checkTags(tags);
  const feed = await feedNamed(em, project, feedName);
  const now = new Date();
  const event = em.create(Event, {
    project,
    feed,
    event: input.event,
    description: input.description ?? null,
    emoji: input.emoji ?? null,
    tags,
    timestamp: input.timestamp ? new Date(input.timestamp) : now,
    createdAt: now,
  });
  await em.flush();
  return event;
}

export interface EventFilter {
  feed?: string | undefined;
  /** `key:value`; the value matches a string tag, or a number or boolean tag it spells. */
  tag?: string | undefined;
}

/** The JSON documents `tags @> …` must contain for a `key:value` filter: one per type the value can be. */
function tagCandidates(tag: string): Record<string, TagValue>[] {
  const colon = tag.indexOf(':');
  const key = colon < 0 ? tag : tag.slice(0, colon);
  if (colon < 0 || !TAG_KEY.test(key)) throw InvalidRequest.field('/query/tag', 'must be key:value with a key of 1–32 lower-case letters, digits and hyphens');
  const value = tag.slice(colon + 1);
  const candidates: Record<string, TagValue>[] = [{ [key]: value }];
  if (value !== '' && Number.isFinite(Number(value))) candidates.push({ [key]: Number(value) });
  if (value === 'true' || value === 'false') candidates.push({ [key]: value === 'true' });
  return candidates;
}

/** A page of events, newest first; each filter is served by its own index ending in the id. */
export async function listEvents(em: EntityManager, project: Project, filter: EventFilter, page: PageRequest): Promise<Event[]> {
  const below = decodeCursor(page.cursor);
  const candidates = filter.tag === undefined ? [] : tagCandidates(filter.tag);
  const qb = em.createQueryBuilder(Event, 'e').select('e.*').where({ project });
  if (filter.feed !== undefined) {
    // Resolved first, so the page walks (feed_id, id); an unknown feed simply matches nothing.
    const feed = await em.findOne(Feed, { project, name: filter.feed });
    if (!feed) return [];
    qb.andWhere({ feed });
  }
  if (below) qb.andWhere({ id: { $lt: below } });
  if (candidates.length > 0) {
    qb.andWhere(`(${candidates.map(() => 'e.tags @> ?::jsonb').join(' or ')})`, candidates.map((c) => JSON.stringify(c)));
  }
  const events = await qb.orderBy({ id: 'desc' }).limit(page.limit + 1).getResultList();
  await em.populate(events, ['feed']);
  return events;
}
