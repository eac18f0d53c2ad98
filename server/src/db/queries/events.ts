/**
 * Events: the order of a project's publications (an advisory lock and the latest id under it), and
 * a page of events for a filter. The page is written out so that each filter keeps to the index
 * that serves it; its rows become managed entities, as `find` would make them.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Event, type TagValue } from '../entities.js';
import { mapRow, query, selectColumns, sqlOnce } from '../raw.js';

/** The class of the advisory lock that orders a project's publications (its second key is the project). */
const PUBLISH_LOCK = 0x5b1e;

/** Waits for the project's publication lock, held until `tx` ends: a project's publications commit one at a time. */
export async function takePublishLock(tx: EntityManager, projectId: string): Promise<void> {
  await query(tx, 'select pg_advisory_xact_lock(?, hashtext(?::text))', [PUBLISH_LOCK, projectId]);
}

/** The id of the project's latest event, or undefined when it has none. */
export async function latestEventId(em: EntityManager, projectId: string): Promise<string | undefined> {
  const [latest] = await query<{ id: string }>(em, 'select id from events where project_id = ? order by id desc limit 1', [projectId]);
  return latest?.id;
}

export interface NewEvent {
  id: string;
  feedId: string;
  event: string;
  description: string | null;
  emoji: string | null;
  tags: Record<string, TagValue>;
  timestamp: Date;
}

/**
 * Inserts the project's new events in one statement (the columns as arrays, one text whatever the
 * count, so it is prepared once), all created at `createdAt`; returns them as managed entities, in
 * no particular order, each with its feed as the reference `tx` holds (loaded, when `tx` loaded it).
 */
export async function insertEvents(tx: EntityManager, projectId: string, createdAt: Date, events: NewEvent[]): Promise<Event[]> {
  const sql = sqlOnce(
    'events:insert',
    () =>
      'insert into events as e (id, project_id, feed_id, event, description, emoji, tags, timestamp, created_at) ' +
      'select v.id, ?::uuid, v.feed_id, v.event, v.description, v.emoji, v.tags, v.timestamp, ?::timestamptz ' +
      'from unnest(?::uuid[], ?::uuid[], ?::text[], ?::text[], ?::text[], ?::jsonb[], ?::timestamptz[]) ' +
      'as v(id, feed_id, event, description, emoji, tags, timestamp) ' +
      `returning ${selectColumns(tx, Event, 'e', 'e')}`,
  );
  const rows = await query<Record<string, unknown>>(tx, sql, [
    projectId,
    createdAt.toISOString(),
    events.map((e) => e.id),
    events.map((e) => e.feedId),
    events.map((e) => e.event),
    events.map((e) => e.description),
    events.map((e) => e.emoji),
    events.map((e) => JSON.stringify(e.tags)),
    events.map((e) => e.timestamp.toISOString()),
  ]);
  return rows.map((row) => mapRow(tx, Event, row, 'e'));
}

export interface EventsQuery {
  projectId: string;
  /** Only this feed's events: the page then walks (feed_id, id). */
  feedId?: string | undefined;
  /** Only events below this id. */
  below?: string | undefined;
  /** Only events whose tags contain one of these documents (`tags @> …`, the GIN index). */
  tagsContainingAny: Record<string, TagValue>[];
  limit: number;
}

/** At most `limit` events matching the query, newest first, as managed entities. */
export async function eventsPage(em: EntityManager, q: EventsQuery): Promise<Event[]> {
  const tags = q.tagsContainingAny;
  const shape = `events:${q.feedId === undefined ? '' : 'feed'}:${q.below === undefined ? '' : 'below'}:${tags.length}`;
  const sql = sqlOnce(
    shape,
    () =>
      `select ${selectColumns(em, Event, 'e', 'e')} from events e where e.project_id = ?` +
      (q.feedId === undefined ? '' : ' and e.feed_id = ?') +
      (q.below === undefined ? '' : ' and e.id < ?') +
      (tags.length === 0 ? '' : ` and (${tags.map(() => 'e.tags @> ?::jsonb').join(' or ')})`) +
      ' order by e.id desc limit ?',
  );
  const params: unknown[] = [q.projectId];
  if (q.feedId !== undefined) params.push(q.feedId);
  if (q.below !== undefined) params.push(q.below);
  for (const document of tags) params.push(JSON.stringify(document));
  params.push(q.limit);
  const rows = await query<Record<string, unknown>>(em, sql, params);
  return rows.map((row) => mapRow(em, Event, row, 'e'));
}
