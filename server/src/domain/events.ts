/** Events: published by the user's own code to a feed, read back newest first. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { v7 } from 'uuid';
import type { components, operations } from '../../../spec/generated/openapi.js';
import type { Project, TagValue } from '../db/entities.js';
import { decodeCursor, type PageRequest } from '../db/page.js';
import { eventsPage, findFeed, insertEvents, publicationTargets, type EventRow } from '../db/repositories/events-rows.js';
import { lockProject, transaction } from '../db/transaction.js';
import { InvalidRequest, NotFound } from '../errors.js';
import { feedNotFound } from './feeds.js';
import { eventCounts, type CountsRequest, type EventCounts } from './event-counts.js';
import { GroupCommit, type Outcome } from './group-commit.js';
import type { Scope } from './scope.js';

/** Where a new live stream of the project starts, and what it reads next. */
export { eventsAfter, latestEventId, type EventRow } from '../db/repositories/events-rows.js';

const MAX_TAGS = 20;
const TAG_KEY = /^[a-z0-9-]{1,32}$/;

/** `POST /v1/projects/{namespace}/feeds/{feed}/events`'s body. */
export type EventInput = components['schemas']['PublishEventRequest'];

/**
 * The limits on tags that the contract cannot express: at most 20 of them, keys of 1–32 `[a-z0-9-]`.
 * `at` is where the tags are in the request (`/body/tags`, or `/body/events/N/tags` in a batch).
 * An end user's properties follow the same rule with a cap of their own.
 */
export function checkTags(tags: Record<string, TagValue>, at = '/body/tags', max = MAX_TAGS, noun = 'tags'): void {
  const keys = Object.keys(tags);
  if (keys.length > max) throw InvalidRequest.field(at, `must have at most ${max} ${noun}`);
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

/** One event of a batch (`POST /v1/projects/{namespace}/events`): a single publication's fields and the name of its feed. */
export type BatchEventInput = components['schemas']['BatchEventItem'];

/** One request's events, stored together with the other requests of its project's group. */
interface Publication {
  em: EntityManager;
  projectId: string;
  inputs: BatchEventInput[];
}

/** A group's events in one insert: a bound on the statement, and on what one transaction holds. */
const MAX_GROUP_EVENTS = 2_000;

/**
 * A project's events: published, listed, counted. One per server: the publications of a project
 * that this server receives are stored in groups (group-commit.ts), one transaction and one insert
 * for all the requests that arrived while the previous group was being stored; servers sharing a
 * database take turns.
 */
export class Events {
  private readonly groups = new GroupCommit<Publication, EventRow[]>(
    storeGroup,
    (publication) => publication.inputs.length,
    MAX_GROUP_EVENTS,
  );

  /** Stores an event in its feed: `publishMany` with a batch of one. */
  async publish({ em }: Scope, project: Project, feedName: string, input: EventInput): Promise<EventRow> {
    // Every field of the body goes on to the batch's event: one the contract adds does not compile until it does.
    const { event: what, description, emoji, tags, timestamp, user_id, notify, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    checkTags(tags ?? {});
    const [event] = await this.store(em, project, [{ feed: feedName, event: what, description, emoji, tags, timestamp, user_id, notify }]);
    return event!;
  }

  /**
   * Stores a batch of events, all or nothing, in one statement. Checks every event before anything
   * is stored: a bad tag is 400 pointing into its event (`/body/events/N/tags…`), a feed the project
   * does not have 404. Returns the events in the order sent.
   */
  async publishMany({ em }: Scope, project: Project, inputs: BatchEventInput[]): Promise<EventRow[]> {
    inputs.forEach((input, i) => checkTags(input.tags ?? {}, `/body/events/${i}/tags`));
    return this.store(em, project, inputs);
  }

  /**
   * Stores a request's events with its project's next group; resolves to them in the order given,
   * their ids each above the one before and the first above the project's latest. 404 when a feed
   * is not the project's (nothing of the request stored).
   */
  private store(em: EntityManager, project: Project, inputs: BatchEventInput[]): Promise<EventRow[]> {
    return this.groups.submit(project.id, { em, projectId: project.id, inputs });
  }

  /** A page of the project's events, newest first, matching every filter given; each filter is served by an index ending in the id. */
  async list({ em }: Scope, project: Project, filter: EventFilter, page: PageRequest): Promise<EventRow[]> {
    const below = decodeCursor(page.cursor);
    // The same filter twice asks nothing more, and each repetition would make PostgreSQL misjudge how
    // few rows match (it multiplies their selectivities) and pick a plan that reads every tagged row.
    const given = filter.tag ?? [];
    const tags = given.map((tag, i) => tagCandidates(tag, `/query/tag/${i}`)).filter((_, i) => given.indexOf(given[i]!) === i);
    let feedId: string | undefined;
    if (filter.feed !== undefined) {
      // Resolved first, so the page walks (feed_id, id); an unknown feed simply matches nothing.
      const feed = await findFeed(em, project.id, filter.feed);
      if (!feed) return [];
      feedId = feed.id;
    }
    return eventsPage(em, { projectId: project.id, feedId, userId: filter.user_id, words: filter.q, below, tags, limit: page.limit + 1 });
  }

  /** The project's events counted per bucket, as `GET …/events/counts` answers them (event-counts.ts). */
  count({ em }: Scope, project: Project, request: CountsRequest): Promise<EventCounts> {
    return eventCounts(em, project, request);
  }
}

/**
 * Stores a group of one project's publications in one transaction, all their events in one insert,
 * ids in the group's order. A project's event ids are handed out in commit order, on every
 * instance: they are chosen under the project's row lock (FOR NO KEY UPDATE, which publishers take
 * one at a time) held until commit. Readers that ask for "the events after id X" (the live stream,
 * Last-Event-ID resumption) therefore never miss an event that was still committing when they read,
 * nor see one twice. A publication naming a feed the project does not have is refused on its own;
 * a deleted project refuses them all.
 */
async function storeGroup(publications: Publication[]): Promise<Outcome<EventRow[]>[]> {
  const { em, projectId } = publications[0]!;
  const names = [...new Set(publications.flatMap((publication) => publication.inputs.map((input) => input.feed)))];
  return transaction(em, async (tx) => {
    try {
      // The project row first, as every writer of a project takes it (transaction.ts). Under KEY
      // SHARE publishers would queue for the id order while holding the row, keeping it share-locked
      // without a gap for as long as events arrive, and a delete would wait that out.
      await lockProject(tx, projectId, 'no key update');
    } catch (error) {
      if (error instanceof NotFound) return publications.map(() => ({ ok: false, error }));
      throw error;
    }
    // Under the project lock: a feed being deleted now is either found with its delete still to come
    // (which then waits for this commit and takes these events with it) or not found at all.
    const targets = await publicationTargets(tx, projectId, names);
    const feeds = targets.feeds;
    let last = targets.latest;
    const now = new Date();
    const outcomes = publications.map((publication): Outcome<EventRow[]> => {
      if (!publication.inputs.every((input) => feeds.has(input.feed))) return { ok: false, error: feedNotFound() };
      const events = publication.inputs.map(({ feed, event, description, emoji, tags, timestamp, user_id, notify, ...unhandled }) => {
        // Every field of the contract's event is stored: one it adds does not compile until it is.
        const _everyField: Record<string, never> = unhandled;
        return {
          id: (last = idAfter(last)),
          feed,
          event,
          description: description ?? null,
          emoji: emoji ?? null,
          tags: tags ?? {},
          userId: user_id ?? null,
          notify: notify ?? false,
          timestamp: timestamp ? new Date(timestamp) : now,
          createdAt: now,
        };
      });
      return { ok: true, value: events };
    });
    const rows = outcomes
      .flatMap((outcome) => (outcome.ok ? outcome.value : []))
      .map((event) => ({ ...event, feedId: feeds.get(event.feed)! }));
    if (rows.length > 0) await insertEvents(tx, projectId, now, rows);
    return outcomes;
  });
}

/** `GET /v1/projects/{namespace}/events`'s filters: see the contract's `listEvents`. */
export type EventFilter = Pick<NonNullable<operations['listEvents']['parameters']['query']>, 'feed' | 'tag' | 'user_id' | 'q'>;

/** The JSON documents `tags @> …` must contain for a `key:value` filter: one per type the value can be; 400 at `at` for a malformed filter. */
export function tagCandidates(tag: string, at: string): Record<string, TagValue>[] {
  const colon = tag.indexOf(':');
  const key = colon < 0 ? tag : tag.slice(0, colon);
  if (colon < 0 || !TAG_KEY.test(key))
    throw InvalidRequest.field(at, 'must be key:value with a key of 1–32 lower-case letters, digits and hyphens');
  const value = tag.slice(colon + 1);
  const candidates: Record<string, TagValue>[] = [{ [key]: value }];
  if (value !== '' && Number.isFinite(Number(value))) candidates.push({ [key]: Number(value) });
  if (value === 'true' || value === 'false') candidates.push({ [key]: value === 'true' });
  return candidates;
}
