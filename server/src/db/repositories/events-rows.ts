/**
 * The events aggregate: a project's feeds, and the events published to them. Every read and write
 * of `feeds` and `events` is here (docs/development.md, Layers), the deletion of events past their
 * retention included.
 *
 * Feeds are few and changed by people: MikroORM's unit of work loads and writes them. Events take
 * the hot path: the project's latest id (publications are ordered under the project's row lock,
 * domain/events.ts), the insert of a group of new events, a page of events for a filter, and the
 * events after a cursor that a live stream reads are written out. Events are only ever shown, never
 * changed, so they stay plain rows: a managed entity per event would cost more than the
 * statements, and a transaction's flush would walk every one of them.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, type Project, type TagValue } from '../entities.js';
import { findPage, type PageRequest } from '../page.js';
import { afterCommit } from '../commit-notices.js';
import { query, sqlOnce } from '../raw.js';
import { rowReader, time, unnestInsert, type ReadColumns } from '../columns.js';
import { QUEUE_EVENT_DELIVERIES } from './webhook-outbox.js';

// ---------- Feeds ----------

/** The project's feed named `name`, or null. */
export function findFeed(em: EntityManager, projectId: string, name: string): Promise<Feed | null> {
  return em.findOne(Feed, { project: projectId, name });
}

/** A page of the project's feeds, newest first. */
export function feedPage(em: EntityManager, projectId: string, page: PageRequest): Promise<Feed[]> {
  return findPage(em, Feed, { project: projectId }, page);
}

/** Every feed of the project (they are capped, MAX_FEEDS_PER_PROJECT), by name. */
export async function feedsOf(em: EntityManager, projectId: string): Promise<{ id: string; name: string }[]> {
  return query<{ id: string; name: string }>(em, 'select id, name from feeds where project_id = ? order by name', [projectId]);
}

/** How many feeds the project has. */
export function countFeeds(em: EntityManager, projectId: string): Promise<number> {
  return em.count(Feed, { project: projectId });
}

/** A new feed of the project, written at once (so that a taken name fails here, as its 409). */
export async function insertFeed(
  em: EntityManager,
  project: Project,
  fields: { name: string; description: string | null; emoji: string | null; type: number },
): Promise<Feed> {
  const feed = em.create(Feed, { project, ...fields });
  await em.flush();
  return feed;
}

/** Sets what is given of the feed's name, description and emoji, written at once (a taken name fails here). */
export async function updateFeedFields(
  em: EntityManager,
  feed: Feed,
  changes: { name?: string; description?: string | null; emoji?: string | null },
): Promise<Feed> {
  if (changes.name !== undefined) feed.name = changes.name;
  if (changes.description !== undefined) feed.description = changes.description;
  if (changes.emoji !== undefined) feed.emoji = changes.emoji;
  await em.flush();
  return feed;
}

/** Deletes the feed (its events go with it, by the foreign key's cascade); false when it was gone already. */
export async function deleteFeedRow(em: EntityManager, feedId: string): Promise<boolean> {
  return (await em.nativeDelete(Feed, { id: feedId })) > 0;
}

// ---------- Events ----------

/** An event as answers show it: its columns, and the name of its feed. The events table's row type, written once. */
export interface EventRow {
  id: string;
  feed: string;
  event: string;
  description: string | null;
  emoji: string | null;
  tags: Record<string, TagValue>;
  userId: string | null;
  notify: boolean;
  timestamp: Date;
  createdAt: Date;
}

/** The columns of `EventRow`, from `events e join feeds f` (FROM_EVENTS). */
const EVENT_COLUMNS: ReadColumns<EventRow> = {
  id: 'e.id',
  feed: 'f.name',
  event: 'e.event',
  description: 'e.description',
  emoji: 'e.emoji',
  tags: 'e.tags',
  userId: 'e.user_id',
  notify: 'e.notify',
  timestamp: time('e.timestamp'),
  createdAt: time('e.created_at'),
};
const EVENT = rowReader<EventRow>(EVENT_COLUMNS);
const FROM_EVENTS = 'from events e join feeds f on f.id = e.feed_id';

/** The words `q=` searches, the expression `events_search_index` is built on (the query must spell it the same). */
const SEARCHED_TEXT = "to_tsvector('simple'::regconfig, e.event || ' ' || coalesce(e.description, ''))";

/**
 * What a group of publications needs once it holds the project's lock, in one statement: the ids of
 * the project's feeds among `names`, by name, and the id of its latest event.
 */
export async function publicationTargets(
  tx: EntityManager,
  projectId: string,
  names: string[],
): Promise<{ feeds: Map<string, string>; latest: string | undefined }> {
  const [row] = await query<{ feeds: Record<string, string> | null; latest: string | null }>(
    tx,
    'select json_object_agg(f.name, f.id) as feeds, ' +
      '(select e.id from events e where e.project_id = ? order by e.id desc limit 1) as latest ' +
      'from feeds f where f.project_id = ? and f.name = any(?::text[])',
    [projectId, projectId, names],
  );
  return { feeds: new Map(Object.entries(row!.feeds ?? {})), latest: row!.latest ?? undefined };
}

/** The id of the project's latest event, or undefined when it has none. */
export async function latestEventId(em: EntityManager, projectId: string): Promise<string | undefined> {
  const [latest] = await query<{ id: string }>(em, 'select id from events where project_id = ? order by id desc limit 1', [projectId]);
  return latest?.id;
}

/** An event to insert: its fields, with its feed by id; the insert sets when it was stored. */
export type NewEvent = Omit<EventRow, 'feed' | 'createdAt'> & { feedId: string };

/** The insert of a group of events: a column per field of NewEvent, the project and the time of storing shared by the group. */
const EVENTS_INSERT = unnestInsert<NewEvent, { projectId: string; createdAt: Date }>(
  'events',
  {
    id: ['id', 'uuid'],
    feedId: ['feed_id', 'uuid'],
    event: ['event', 'text'],
    description: ['description', 'text'],
    emoji: ['emoji', 'text'],
    tags: ['tags', 'jsonb'],
    userId: ['user_id', 'text'],
    notify: ['notify', 'boolean'],
    timestamp: ['timestamp', 'timestamptz'],
  },
  { projectId: ['project_id', 'uuid'], createdAt: ['created_at', 'timestamptz'] },
);

// One statement, so one round trip whatever it keeps up: the events (EVENTS_INSERT: the columns as
// arrays, one text whatever the count, so it is prepared once), then from the rows inserted, the feeds' counts
// per minute, quarter hour, hour and UTC day of the events' timestamps (what a chart's buckets sum:
// db/repositories/event-counts-rows.ts), and the end users' first and last
// events and number of events, and the webhook deliveries the events' endpoints are owed
// (db/repositories/webhook-outbox.ts). All are written with the events, in their transaction: no
// crash or race can leave one without the other.
const INSERT_EVENTS = `with inserted as (
    ${EVENTS_INSERT.sql}
    returning id, project_id, feed_id, user_id, timestamp, tags, notify
  ), ${QUEUE_EVENT_DELIVERIES}, event_counted as (
    insert into event_counts as c (project_id, span, start, feed_id, count)
    select i.project_id, s.span, to_timestamp(floor(extract(epoch from i.timestamp) / s.span) * s.span), i.feed_id, count(*)
    from inserted i cross join (values (60), (900), (3600), (86400)) as s(span)
    group by 1, 2, 3, 4
    on conflict (project_id, span, start, feed_id) do update set count = c.count + excluded.count
  ), seen as (
    insert into end_users as u (project_id, user_id, first_seen, last_seen, event_count)
    select i.project_id, i.user_id, min(i.timestamp), max(i.timestamp), count(*)
    from inserted i where i.user_id is not null
    group by 1, 2
    on conflict (project_id, user_id) do update set
      first_seen = least(u.first_seen, excluded.first_seen),
      last_seen = greatest(u.last_seen, excluded.last_seen),
      event_count = u.event_count + excluded.event_count
  )
  select count(*)::int as n from inserted`;

/**
 * Inserts the project's new events, all created at `createdAt`, with their counts and end users
 * (INSERT_EVENTS), ids ascending. Once the transaction commits, every instance hears of the last:
 * a live stream sends everything after its cursor, in id order, so one message covers the group.
 */
export async function insertEvents(tx: EntityManager, projectId: string, createdAt: Date, events: NewEvent[]): Promise<void> {
  await query(tx, INSERT_EVENTS, EVENTS_INSERT.params(events, { projectId, createdAt }));
  afterCommit(tx, { kind: 'event', projectId, eventId: events[events.length - 1]!.id });
}

export interface EventsQuery {
  projectId: string;
  /** Only this feed's events: the page then walks (feed_id, id). */
  feedId?: string | undefined;
  /** Only this end user's events: the page then walks (project_id, user_id, id). */
  userId?: string | undefined;
  /** Only events with every word of this text (`events_search_index`). */
  words?: string | undefined;
  /** Only events below this id. */
  below?: string | undefined;
  /**
   * Only events whose tags contain, for each entry, one of its documents (`tags @> any(…)`, the GIN
   * index, one bitmap per document): the entries are ANDed, the documents of one entry ORed. One
   * statement text per number of entries, whatever the documents.
   */
  tags: Record<string, TagValue>[][];
  limit: number;
}

/** At most `limit` events matching the query, newest first. */
export async function eventsPage(em: EntityManager, q: EventsQuery): Promise<EventRow[]> {
  const shape =
    `events:${q.feedId === undefined ? '' : 'feed'}:${q.userId === undefined ? '' : 'user'}:${q.words === undefined ? '' : 'q'}:` +
    `${q.below === undefined ? '' : 'below'}:${q.tags.length}`;
  const sql = sqlOnce(
    shape,
    () =>
      `select ${EVENT.select} ${FROM_EVENTS} where e.project_id = ?` +
      (q.feedId === undefined ? '' : ' and e.feed_id = ?') +
      (q.userId === undefined ? '' : ' and e.user_id = ?') +
      (q.words === undefined ? '' : ` and ${SEARCHED_TEXT} @@ plainto_tsquery('simple'::regconfig, ?)`) +
      (q.below === undefined ? '' : ' and e.id < ?') +
      ' and e.tags @> any(?::jsonb[])'.repeat(q.tags.length) +
      ' order by e.id desc limit ?',
  );
  const params: unknown[] = [q.projectId];
  if (q.feedId !== undefined) params.push(q.feedId);
  if (q.userId !== undefined) params.push(q.userId);
  if (q.words !== undefined) params.push(q.words);
  if (q.below !== undefined) params.push(q.below);
  for (const anyOf of q.tags) params.push(anyOf.map((document) => JSON.stringify(document)));
  params.push(q.limit);
  return (await query(em, sql, params)).map(EVENT.read);
}

/** An event with its feed's id, by which a live stream narrowed to one feed picks its events. */
export interface LiveEventRow extends EventRow {
  feedId: string;
}

const LIVE_EVENT = rowReader<LiveEventRow>({ ...EVENT_COLUMNS, feedId: 'e.feed_id' });

/** At most `limit` of the project's events after the id `cursor`, oldest first, of every feed: a live stream's next batch. */
export async function eventsAfter(em: EntityManager, projectId: string, cursor: string, limit: number): Promise<LiveEventRow[]> {
  const rows = await query(em, `select ${LIVE_EVENT.select} ${FROM_EVENTS} where e.project_id = ? and e.id > ? order by e.id limit ?`, [
    projectId,
    cursor,
    limit,
  ]);
  return rows.map(LIVE_EVENT.read);
}

/** The events among `ids` that are still stored, in no particular order. */
export async function eventsByIds(em: EntityManager, ids: string[]): Promise<EventRow[]> {
  return (await query(em, `select ${EVENT.select} ${FROM_EVENTS} where e.id = any(?::uuid[])`, [ids])).map(EVENT.read);
}

// ---------- Retention ----------

// `= any(array(…))`, not `in (select …)`: the ids come first (an InitPlan walking the
// primary key from its oldest end, locking as it goes), then the delete finds them by the primary
// key again. The plan stays so with the generic plan a prepared statement may settle on, where the
// limit is not known: `in (select …)` then became a hash join over a sequential scan of the whole
// table. Rows another transaction holds (a project or feed being deleted, whose cascade takes them)
// are skipped, so this never waits for a request nor makes one wait beyond its own batch.
const DELETE_EVENTS = `with gone as (
    delete from events where id = any(array(
      select id from events where id < ?::uuid order by id limit ? for update skip locked
    )) returning 1
  )
  select count(*)::int as n from gone`;

/** Deletes at most `limit` of the oldest events whose id is below `idBelow`; how many it deleted. */
export async function deleteEventsWithIdBelow(em: EntityManager, idBelow: string, limit: number): Promise<number> {
  const [row] = await query<{ n: number }>(em, DELETE_EVENTS, [idBelow, limit]);
  return row!.n;
}
