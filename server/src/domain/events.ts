/** Events: published by the user's own code to a feed, read back newest first. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { v7 } from 'uuid';
import { Event, Feed, type Project, type TagValue } from '../db/entities.js';
import { eventsPage, insertEvents, latestEventId, takePublishLock } from '../db/queries/events.js';
import { InvalidRequest } from '../errors.js';
import { feedNotFound } from './feeds.js';
import { decodeCursor, type PageRequest } from './pagination.js';
import { lockProject, transaction } from './transaction.js';

/** Where a new live stream of the project starts. */
export { latestEventId };

const MAX_TAGS = 20;
const TAG_KEY = /^[a-z0-9-]{1,32}$/;

export interface EventInput {
  event: string;
  description?: string | null | undefined;
  emoji?: string | null | undefined;
  tags?: Record<string, TagValue> | undefined;
  timestamp?: string | undefined;
}

/**
 * The limits on tags that the contract cannot express: at most 20 of them, keys of 1–32 `[a-z0-9-]`.
 * `at` is where the tags are in the request (`/body/tags`, or `/body/events/N/tags` in a batch).
 */
function checkTags(tags: Record<string, TagValue>, at = '/body/tags'): void {
  const keys = Object.keys(tags);
  if (keys.length > MAX_TAGS) throw InvalidRequest.field(at, `must have at most ${MAX_TAGS} tags`);
  const bad = keys.find((key) => !TAG_KEY.test(key));
  if (bad !== undefined) throw InvalidRequest.field(`${at}/${bad}`, 'must be a key of 1–32 lower-case letters, digits and hyphens');
}

/**
 * A UUID v7 above `last`: a fresh one, unless this instance's clock is behind the last publisher's
 * (or in the same millisecond), then the last id plus one, keeping the version and variant bits.
 */
function idAfter(last: string | undefined): string {
  const fresh = v7();
  if (last === undefined || fresh > last) return fresh;
  const next = (BigInt(`0x${last.replace(/-/g, '')}`) + 1n).toString(16).padStart(32, '0');
  return `${next.slice(0, 8)}-${next.slice(8, 12)}-${next.slice(12, 16)}-${next.slice(16, 20)}-${next.slice(20)}`;
}

/** One event of a batch: a single publication's fields and the name of its feed. */
export interface BatchEventInput extends EventInput {
  feed: string;
}

/** Stores an event in its feed: `publishEvents` with a batch of one. */
export async function publishEvent(em: EntityManager, project: Project, feedName: string, input: EventInput): Promise<Event> {
  checkTags(input.tags ?? {});
  const [event] = await storeInOrder(em, project, [{ ...input, feed: feedName }]);
  return event!;
}

/**
 * Stores a batch of events, all or nothing, in one statement. Checks every event before anything is
 * stored: a bad tag is 400 pointing into its event (`/body/events/N/tags…`), a feed the project does
 * not have 404. Returns the events in the order sent.
 */
export async function publishEvents(em: EntityManager, project: Project, inputs: BatchEventInput[]): Promise<Event[]> {
  inputs.forEach((input, i) => checkTags(input.tags ?? {}, `/body/events/${i}/tags`));
  return storeInOrder(em, project, inputs);
}

/**
 * Stores events in one transaction, their ids in the order given, each above the one before and
 * the first above the project's latest. A project's event ids are handed out in commit order, on
 * every instance: they are chosen under a per-project lock held until commit. Readers that ask for
 * "the events after id X" (the live stream, Last-Event-ID resumption) therefore never miss an event
 * that was still committing when they read, nor see one twice. 404 when a feed is not the project's.
 */
async function storeInOrder(em: EntityManager, project: Project, inputs: BatchEventInput[]): Promise<Event[]> {
  const names = [...new Set(inputs.map((input) => input.feed))];
  return transaction(em, async (tx) => {
    // The project row first, as every writer of a project takes it (transaction.ts), FOR NO KEY UPDATE:
    // publishers of a project wait here one at a time, in turn with a delete of the project. Under
    // KEY SHARE they would queue for the id order below while holding the row, a queue that keeps the
    // row share-locked without a gap for as long as events arrive, and a delete would wait it out.
    await lockProject(tx, project.id, 'no key update');
    // Under the project lock: a feed being deleted now is either found with its delete still to come
    // (which then waits for this commit and takes these events with it) or not found at all.
    const feeds = new Map((await tx.find(Feed, { project, name: { $in: names } })).map((feed) => [feed.name, feed]));
    if (names.some((name) => !feeds.has(name))) throw feedNotFound();
    await takePublishLock(tx, project.id);
    let last = await latestEventId(tx, project.id);
    const now = new Date();
    const rows = inputs.map((input) => {
      last = idAfter(last);
      return {
        id: last,
        feedId: feeds.get(input.feed)!.id,
        event: input.event,
        description: input.description ?? null,
        emoji: input.emoji ?? null,
        tags: input.tags ?? {},
        timestamp: input.timestamp ? new Date(input.timestamp) : now,
      };
    });
    const events = await insertEvents(tx, project.id, now, rows);
    return events.sort((a, b) => (a.id < b.id ? -1 : 1));
  });
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
  if (colon < 0 || !TAG_KEY.test(key))
    throw InvalidRequest.field('/query/tag', 'must be key:value with a key of 1–32 lower-case letters, digits and hyphens');
  const value = tag.slice(colon + 1);
  const candidates: Record<string, TagValue>[] = [{ [key]: value }];
  if (value !== '' && Number.isFinite(Number(value))) candidates.push({ [key]: Number(value) });
  if (value === 'true' || value === 'false') candidates.push({ [key]: value === 'true' });
  return candidates;
}

/** A page of events, newest first; each filter is served by its own index ending in the id. */
export async function listEvents(em: EntityManager, project: Project, filter: EventFilter, page: PageRequest): Promise<Event[]> {
  const below = decodeCursor(page.cursor);
  const tagsContainingAny = filter.tag === undefined ? [] : tagCandidates(filter.tag);
  let feedId: string | undefined;
  if (filter.feed !== undefined) {
    // Resolved first, so the page walks (feed_id, id); an unknown feed simply matches nothing.
    const feed = await em.findOne(Feed, { project, name: filter.feed });
    if (!feed) return [];
    feedId = feed.id;
  }
  const events = await eventsPage(em, { projectId: project.id, feedId, below, tagsContainingAny, limit: page.limit + 1 });
  await em.populate(events, ['feed']);
  return events;
}

/** At most `limit` of the project's events after `cursor`, oldest first, each with its feed: a live stream's next batch. */
export function eventsAfter(em: EntityManager, projectId: string, cursor: string, limit: number): Promise<Event[]> {
  return em.find(Event, { project: projectId, id: { $gt: cursor } }, { orderBy: { id: 'asc' }, limit, populate: ['feed'] });
}
