/**
 * The webhooks aggregate: a project's endpoints, and the deliveries queued for them (the outbox,
 * docs/architecture.md, Webhooks). Every read and write of `webhook_endpoints` and
 * `webhook_deliveries` is here, the part of the events' insert that queues their deliveries
 * included (`QUEUE_EVENT_DELIVERIES`, which db/repositories/events-rows.ts puts in its statement).
 *
 * Invariants the statements keep together (the migration says what each column holds):
 * - `pending` is the number of the endpoint's deliveries in state `pending`: what queues adds to
 *   it in the same statement, what settles takes from it in the same statement.
 * - At most `MAX_PENDING` deliveries wait per endpoint: a queue with no room left for all it
 *   matched queues what fits and pauses the endpoint (`disabled_reason` `backlog`).
 * - A delivery is sent by one instance at a time: it is claimed with `for update skip locked`
 *   and a lease (`leased_until`, past the longest batch), and an outcome is written only for the
 *   attempt that claimed it (`attempts` unchanged since).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { afterCommit } from '../commit-notices.js';
import { query } from '../raw.js';
import { rowReader, time, unnestRows } from '../columns.js';

/** Deliveries that may wait per endpoint; past it the endpoint is paused. */
export const MAX_PENDING = 10_000;

/** Attempts kept per delivery in its log, newest first. */
export const KEPT_ATTEMPTS = 20;

export type WebhookFormat = 'standard' | 'slack' | 'discord';
export type DisabledReason = 'gone' | 'failing' | 'backlog' | 'creator_left';
export type WebhookType = 'event.created' | 'insight.updated' | 'member.joined' | 'member.left' | 'project.updated';

export interface WebhookFilter {
  types: WebhookType[];
  feeds: string[];
  tags: string[];
  notifyOnly: boolean;
}

/** A person as an endpoint shows it: its username and icon (the icon store's key, or null). */
export interface EndpointMaker {
  id: string;
  username: string;
  icon: string | null;
}

export interface EndpointRow {
  id: string;
  projectId: string;
  url: string;
  description: string | null;
  format: WebhookFormat;
  filter: WebhookFilter;
  enabled: boolean;
  disabledReason: DisabledReason | null;
  disabledAt: Date | null;
  /** When the backlog's cap paused it: the first event left out. */
  missedFromEvent: string | null;
  /** The signing secrets: the current one, and the previous one while it still signs. */
  secrets: string[];
  pending: number;
  createdAt: Date;
  /** The member it answers to: who made it or last chose where it sends; null when unknown or the account is gone. */
  createdBy: EndpointMaker | null;
}

// The signing secrets of the endpoint `w`: the current one, and the previous one while it still signs.
const SECRETS = 'case when w.previous_secret_expires_at > now() then array[w.secret, w.previous_secret] else array[w.secret] end';

/** The columns of `EndpointRow`, from `webhook_endpoints w`. */
const ENDPOINT = rowReader<EndpointRow>({
  id: 'w.id',
  projectId: 'w.project_id',
  url: 'w.url',
  description: 'w.description',
  format: 'w.format',
  filter: "json_build_object('types', w.types, 'feeds', w.feeds, 'tags', w.tags, 'notifyOnly', w.notify_only)",
  enabled: 'w.enabled',
  disabledReason: 'w.disabled_reason',
  disabledAt: time('w.disabled_at'),
  missedFromEvent: 'w.missed_from_event',
  secrets: SECRETS,
  pending: 'w.pending',
  createdAt: time('w.created_at'),
  createdBy: "(select json_build_object('id', u.id, 'username', u.username, 'icon', u.icon) from users u where u.id = w.created_by)",
});

// ---------- Endpoints ----------

/** How many endpoints the project has. */
export async function countEndpoints(em: EntityManager, projectId: string): Promise<number> {
  const [row] = await query<{ n: number }>(em, 'select count(*)::int as n from webhook_endpoints where project_id = ?', [projectId]);
  return row!.n;
}

/** At most `limit` of the project's endpoints, newest first, below the id `below` when given. */
export async function endpointPage(em: EntityManager, projectId: string, below: string | undefined, limit: number): Promise<EndpointRow[]> {
  const rows = await query(
    em,
    below === undefined
      ? `select ${ENDPOINT.select} from webhook_endpoints w where w.project_id = ? order by w.id desc limit ?`
      : `select ${ENDPOINT.select} from webhook_endpoints w where w.project_id = ? and w.id < ? order by w.id desc limit ?`,
    below === undefined ? [projectId, limit] : [projectId, below, limit],
  );
  return rows.map(ENDPOINT.read);
}

/** The project's endpoint `id`, or null; `forUpdate` locks its row until the transaction ends. */
export async function findEndpoint(em: EntityManager, projectId: string, id: string, forUpdate = false): Promise<EndpointRow | null> {
  const [row] = await query(
    em,
    `select ${ENDPOINT.select} from webhook_endpoints w where w.id = ? and w.project_id = ?${forUpdate ? ' for update' : ''}`,
    [id, projectId],
  );
  return row ? ENDPOINT.read(row) : null;
}

export interface NewEndpoint {
  id: string;
  projectId: string;
  url: string;
  description: string | null;
  format: WebhookFormat;
  filter: WebhookFilter;
  enabled: boolean;
  secret: string;
  /** The member who makes it. */
  createdBy: string;
}

/** Adds an endpoint; answers it as stored. */
export async function insertEndpoint(em: EntityManager, e: NewEndpoint): Promise<EndpointRow> {
  const [row] = await query(
    em,
    `insert into webhook_endpoints as w (id, project_id, url, description, format, types, feeds, tags, notify_only, enabled, secret, created_by, created_at)
     values (?, ?, ?, ?, ?, ?::text[], ?::text[], ?::text[], ?, ?, ?, ?, now()) returning ${ENDPOINT.select}`,
    [
      e.id,
      e.projectId,
      e.url,
      e.description,
      e.format,
      e.filter.types,
      e.filter.feeds,
      e.filter.tags,
      e.filter.notifyOnly,
      e.enabled,
      e.secret,
      e.createdBy,
    ],
  );
  return ENDPOINT.read(row!);
}

/** What a change sets; `enabled` true also clears why the service had turned it off. */
export interface EndpointChanges {
  url: string;
  description: string | null;
  format: WebhookFormat;
  filter: WebhookFilter;
  enabled: boolean;
  /** The member it answers to from now on (the caller keeps it or names another). */
  createdBy: string | null;
}

/** Writes the endpoint's settings (its row locked by the caller); answers it as stored. */
export async function updateEndpoint(em: EntityManager, id: string, c: EndpointChanges): Promise<EndpointRow> {
  const [row] = await query(
    em,
    `update webhook_endpoints w set url = ?, description = ?, format = ?, types = ?::text[], feeds = ?::text[], tags = ?::text[],
       notify_only = ?, enabled = ?, created_by = ?,
       disabled_reason = case when ? then null else w.disabled_reason end,
       disabled_at = case when ? then null else w.disabled_at end,
       missed_from_event = case when ? then null else w.missed_from_event end,
       failing_since = case when ? and not w.enabled then null else w.failing_since end
     where w.id = ? returning ${ENDPOINT.select}`,
    [
      c.url,
      c.description,
      c.format,
      c.filter.types,
      c.filter.feeds,
      c.filter.tags,
      c.filter.notifyOnly,
      c.enabled,
      c.createdBy,
      c.enabled,
      c.enabled,
      c.enabled,
      c.enabled,
      id,
    ],
  );
  return ENDPOINT.read(row!);
}

/** Deletes the project's endpoint `id` and its deliveries; false when it was gone already. */
export async function deleteEndpoint(em: EntityManager, projectId: string, id: string): Promise<boolean> {
  const rows = await query(em, 'delete from webhook_endpoints where id = ? and project_id = ? returning 1', [id, projectId]);
  return rows.length > 0;
}

/** Makes `secret` the endpoint's secret; the one it replaces keeps signing until `previousUntil`. */
export async function replaceSecret(em: EntityManager, id: string, secret: string, previousUntil: Date): Promise<void> {
  await query(em, 'update webhook_endpoints set previous_secret = secret, previous_secret_expires_at = ?, secret = ? where id = ?', [
    previousUntil.toISOString(),
    secret,
    id,
  ]);
}

/**
 * Turns off the project's enabled endpoints that answer to `userId`, as that member's place in the
 * project ends (in the departure's transaction), each with its `webhook.disabled` entry
 * (`creator_left`) written by the same statement. Their waiting deliveries stay, unsent while the
 * endpoint is off (`claimDue` takes only enabled endpoints'). Answers how many it turned off.
 */
export async function disableEndpointsOf(em: EntityManager, departure: { projectId: string; userId: string }): Promise<number> {
  const [row] = await query<{ n: number }>(
    em,
    `with turned_off as (
       update webhook_endpoints w set enabled = false, disabled_reason = 'creator_left', disabled_at = now()
       where w.project_id = ? and w.created_by = ? and w.enabled
       returning w.id, w.project_id, w.url, w.format
     ), noticed as (${disabledNotices('turned_off', "'creator_left'")})
     select count(*)::int as n from turned_off`,
    [departure.projectId, departure.userId],
  );
  return row!.n;
}

// ---------- Queueing ----------

// A UUID v7 made in SQL (PostgreSQL 15 has no uuidv7()): the milliseconds since 1970 over the
// first 48 bits of a random UUID, and the version bits turned from 4 to 7. Deliveries are paged by
// id, newest first, like every other list.
const NEW_ID = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
  substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

// The address `url` of an endpoint of `format` (SQL expressions) as members are shown it:
// webhooks/url-mask.ts's `shownUrl` over an address as the endpoint keeps it (a URL's `href`, so
// with no user info and its host written as a parser writes it): the origin, then the first path
// segments, at most 3 and never the last non-empty one, each with its `/`, then the mask.
// tests/webhooks/url-mask.test.ts holds the two to the same answers.
// (An href's host always ends at a `/`; `\x3f` is `?`, which a statement's text cannot hold
// outside a parameter.)
export function shownUrlSql(url: string, format: string): string {
  const path = `regexp_replace(substring(${url} from '^[^:]+://[^/]*/([^\\x3f#]*)'), '/+$', '')`;
  return `case when ${format} in ('slack', 'discord') then
      substring(${url} from '^[^:]+://[^/]*') || '/' || coalesce((
        select string_agg(s.segment || '/', '' order by s.n)
        from (select segment, n, count(*) over () as total from unnest(string_to_array(${path}, '/')) with ordinality t(segment, n)) s
        where s.n <= least(3, s.total - 1)
      ), '') || '••••'
    else ${url} end`;
}

// The `webhook.disabled` activity entry of each endpoint `rows` names (an SQL source with `id`,
// `project_id`, `url` and `format`, with its condition), for `reason` (an SQL expression): written
// by the statement that turns the endpoints off, so that none is ever off without its entry. A
// Slack or Discord address is a secret: the entry, read by every member, names it masked.
const disabledNotices = (rows: string, reason: string) => `insert into activity (id, project_id, actor_id, type, data, created_at)
    select ${NEW_ID}, project_id, null, 'webhook.disabled',
      jsonb_build_object('webhook', id, 'url', ${shownUrlSql('url', 'format')}, 'reason', ${reason}), now()
    from ${rows}`;

// Whether the event `e` of the feed `f` passes the filter of the endpoint `w`: every list empty
// lets everything through; a tag filter `key:value` matches the tag's value as text (a number or
// boolean as it is spelt), like the events list's `tag` filter.
const EVENT_MATCHES = `w.enabled
  and (w.types = '{}' or 'event.created' = any(w.types))
  and (w.feeds = '{}' or f.name = any(w.feeds))
  and (e.notify or not w.notify_only)
  and not exists (select 1 from unnest(w.tags) t where (e.tags ->> split_part(t, ':', 1)) is distinct from substr(t, strpos(t, ':') + 1))`;

// From `matched(endpoint_id, type, event_id, payload, n, room)` (n: the match's rank for its
// endpoint; only enabled endpoints match), the deliveries that fit, and each endpoint's `pending`
// raised by what was queued, paused when some did not fit, with the first event left out (from
// which enabling it queues again) and its `webhook.disabled` activity entry. `w.pending` in the
// update is the row's latest: a concurrent settle is counted too.
const QUEUE_MATCHED = `queued as (
    insert into webhook_deliveries (id, endpoint_id, type, event_id, payload, next_attempt_at, created_at)
    select ${NEW_ID}, m.endpoint_id, m.type, m.event_id, m.payload, now(), now() from matched m where m.n <= m.room
  ), counted as (
    update webhook_endpoints w set
      pending = w.pending + least(c.total, c.room),
      enabled = w.enabled and c.total <= c.room,
      disabled_reason = case when c.total > c.room then 'backlog' else w.disabled_reason end,
      disabled_at = case when c.total > c.room then now() else w.disabled_at end,
      missed_from_event = case when c.total > c.room then c.first_missed else w.missed_from_event end
    from (
      select endpoint_id, count(*)::int as total, greatest(min(room), 0)::int as room,
        (array_agg(event_id order by n) filter (where n > greatest(room, 0)))[1] as first_missed
      from matched group by 1
    ) c
    where w.id = c.endpoint_id
    returning w.id, w.project_id, w.url, w.format, not w.enabled as paused
  ), paused_noticed as (${disabledNotices('counted where paused', "'backlog'")})`;

/**
 * The part of the events' insert (db/repositories/events-rows.ts, `INSERT_EVENTS`) that queues an
 * `event.created` delivery for every endpoint whose filter an inserted event passes, in the same
 * statement: a delivery exists exactly when its event does. Reads the CTE `inserted` (id,
 * project_id, feed_id, tags, notify of each event) and adds the CTEs `matched`, `queued` and `counted`.
 */
export const QUEUE_EVENT_DELIVERIES = `matched as (
    select w.id as endpoint_id, 'event.created' as type, e.id as event_id, null::jsonb as payload,
      row_number() over (partition by w.id order by e.id) as n, ${MAX_PENDING} - w.pending as room
    from inserted e join feeds f on f.id = e.feed_id join webhook_endpoints w on w.project_id = e.project_id
    where ${EVENT_MATCHES}
  ), ${QUEUE_MATCHED}`;

/**
 * The CTEs (`matched`, `queued`, `counted`) of a statement that queues one change other than an
 * event for every enabled endpoint of the project whose `types` let it through. Each argument is
 * an SQL expression of the statement: the project's id (null: nothing is queued), the type, and
 * `data` as the API shows it (jsonb).
 */
export function queueChangeCtes(projectId: string, type: string, data: string): string {
  return `matched as (
    select w.id as endpoint_id, ${type} as type, null::uuid as event_id, ${data} as payload, 1 as n, ${MAX_PENDING} - w.pending as room
    from webhook_endpoints w
    where w.project_id = ${projectId} and w.enabled and (w.types = '{}' or ${type} = any(w.types))
  ), ${QUEUE_MATCHED}`;
}

const QUEUE_CHANGE = `with ${queueChangeCtes('?::uuid', '?::text', '?::jsonb')} select 1`;

/**
 * Queues a change other than an event (`data` as the API shows it) in the caller's transaction:
 * the delivery commits with the change or not at all.
 */
export async function queueChange(em: EntityManager, projectId: string, type: WebhookType, data: unknown): Promise<void> {
  await query(em, QUEUE_CHANGE, [type, JSON.stringify(data), projectId, type]);
  afterCommit(em, { kind: 'deliveries-queued' });
}

/**
 * Queues again, for one endpoint, the project's stored events created since `since` (and with an
 * id from `fromId`, the first id that instant can have) that pass its filter, oldest first, as
 * many as its backlog has room for. Answers how many were queued, and the creation time of the
 * first event left out for want of room (null when none was).
 */
export async function queueRecovery(
  em: EntityManager,
  endpointId: string,
  since: Date,
  fromId: string,
): Promise<{ queued: number; resumeSince: Date | null }> {
  const [row] = await query<{ queued: number; resume_since: string | null }>(
    em,
    `with candidates as (
       select w.id as endpoint_id, e.id as event_id, e.created_at, row_number() over (order by e.id) as n, ${MAX_PENDING} - w.pending as room
       from webhook_endpoints w
       join events e on e.project_id = w.project_id and e.id >= ?::uuid and e.created_at >= ?::timestamptz
       join feeds f on f.id = e.feed_id
       where w.id = ? and ${EVENT_MATCHES}
       order by e.id
       limit ${MAX_PENDING + 1}
     ), queued as (
       insert into webhook_deliveries (id, endpoint_id, type, event_id, next_attempt_at, created_at)
       select ${NEW_ID}, c.endpoint_id, 'event.created', c.event_id, now(), now() from candidates c where c.n <= c.room
       returning 1
     ), counted as (
       update webhook_endpoints w set pending = w.pending + (select count(*) from queued) where w.id = ?
     )
     select (select count(*) from queued)::int as queued,
       (select to_json(created_at) #>> '{}' from candidates where n > room order by n limit 1) as resume_since`,
    [fromId, since.toISOString(), endpointId, endpointId],
  );
  if (row!.queued > 0) afterCommit(em, { kind: 'deliveries-queued' });
  return { queued: row!.queued, resumeSince: row!.resume_since === null ? null : new Date(row!.resume_since) };
}

// ---------- Delivering ----------

/** A queued delivery's own fields, as the claim and the delivery log both read them. */
interface QueuedDelivery {
  id: string;
  endpointId: string;
  projectId: string;
  type: WebhookType;
  /** `event.created`: the event to read; otherwise null. */
  eventId: string | null;
  /** Other types: `data` as queued; `event.created`: null. */
  payload: unknown;
  createdAt: Date;
}

/** A delivery an instance has claimed, with what it needs to send it. */
export interface ClaimedDelivery extends QueuedDelivery {
  /** Attempts begun, this one included: an outcome is written only while it is unchanged. */
  attempt: number;
  url: string;
  format: WebhookFormat;
  secrets: string[];
}

/** The columns of `ClaimedDelivery`, from `webhook_deliveries d` and its endpoint `w`. */
const CLAIMED = rowReader<ClaimedDelivery>({
  id: 'd.id',
  endpointId: 'd.endpoint_id',
  projectId: 'w.project_id',
  type: 'd.type',
  eventId: 'd.event_id',
  payload: 'd.payload',
  attempt: 'd.attempts',
  createdAt: time('d.created_at'),
  url: 'w.url',
  format: 'w.format',
  secrets: SECRETS,
});

/**
 * Claims deliveries that are due, at most `perEndpoint` of each enabled endpoint not in
 * `skipEndpoints` (one of each in `probeEndpoints`) and `limit` in all, for `leaseMs`: until then
 * no instance takes them again. Rows another instance is claiming are skipped, never waited for.
 */
export async function claimDue(
  em: EntityManager,
  options: { skipEndpoints: string[]; probeEndpoints: string[]; perEndpoint: number; limit: number; leaseMs: number },
): Promise<ClaimedDelivery[]> {
  const rows = await query(
    em,
    // The endpoints with pending deliveries, one index descent each (a skip scan of the index of due
    // rows, which PostgreSQL 15 does not do by itself), then each one's due rows.
    `with recursive working as (
       (select endpoint_id from webhook_deliveries where state = 'pending' order by endpoint_id limit 1)
       union all
       select (select d.endpoint_id from webhook_deliveries d where d.state = 'pending' and d.endpoint_id > working.endpoint_id
               order by d.endpoint_id limit 1)
       from working where working.endpoint_id is not null
     ), due as (
       select d.id from working join webhook_endpoints w on w.id = working.endpoint_id
       cross join lateral (
         select d.id from webhook_deliveries d
         where d.endpoint_id = w.id and d.state = 'pending' and d.next_attempt_at <= now()
           and (d.leased_until is null or d.leased_until < now())
         order by d.next_attempt_at limit case when w.id = any(?::uuid[]) then 1 else ? end
         for update of d skip locked
       ) d
       where w.enabled and w.id <> all(?::uuid[])
       limit ?
     )
     update webhook_deliveries d set attempts = d.attempts + 1, leased_until = now() + ? * interval '1 millisecond'
     from due, webhook_endpoints w
     where d.id = due.id and w.id = d.endpoint_id
     returning ${CLAIMED.select}`,
    [options.probeEndpoints, options.perEndpoint, options.skipEndpoints, options.limit, options.leaseMs],
    { planEachTime: true },
  );
  return rows.map(CLAIMED.read);
}

/** One attempt's outcome, as the delivery's log keeps it. */
export interface AttemptEntry {
  at: string;
  status_code: number | null;
  duration_ms: number;
  body: string | null;
  error: string | null;
}

/** What became of a claimed attempt: `retryAt` null with `delivered` false means it failed for good. */
export interface Outcome {
  id: string;
  attempt: number;
  entry: AttemptEntry;
  delivered: boolean;
  /** The endpoint answered 410 Gone: it is turned off at once. */
  gone: boolean;
  retryAt: Date | null;
}

/** Outcomes as a row source of `settle`'s statement, one array per field. */
const OUTCOMES = unnestRows<Outcome>('o', {
  id: ['id', 'uuid'],
  attempt: ['attempt', 'int'],
  entry: ['entry', 'jsonb'],
  delivered: ['delivered', 'boolean'],
  gone: ['gone', 'boolean'],
  retryAt: ['retry_at', 'timestamptz'],
});

/** An endpoint a settle turned off (a settle never pauses one for its backlog: queueing does). */
export interface DisabledEndpoint {
  id: string;
  projectId: string;
  url: string;
  format: WebhookFormat;
  reason: Exclude<DisabledReason, 'backlog' | 'creator_left'>;
}

/**
 * Writes the outcomes of claimed attempts, in one statement: each delivery's state, next attempt
 * and log (only where the attempt is still the latest claimed), and for each endpoint, `pending`
 * lowered by what settled for good, when its failures began (`failing_since`, cleared by a
 * success), and whether it is turned off: at once on a 410, or when it has failed without a
 * success for `failingForMs`. An endpoint this turns off gets its `webhook.disabled` activity entry
 * in the same statement, so no crash can leave one off without it. Answers the endpoints this turned off.
 */
export async function settle(em: EntityManager, outcomes: Outcome[], failingForMs: number): Promise<DisabledEndpoint[]> {
  if (outcomes.length === 0) return [];
  return query<DisabledEndpoint>(
    em,
    `with outcome as (
       select * from ${OUTCOMES.source}
     ), settled as (
       update webhook_deliveries d set
         state = case when o.delivered then 'delivered' when o.retry_at is null then 'failed' else 'pending' end,
         next_attempt_at = case when o.delivered then null else o.retry_at end,
         leased_until = null,
         log = jsonb_path_query_array(jsonb_build_array(o.entry) || d.log, '$[0 to ${KEPT_ATTEMPTS - 1}]')
       from outcome o
       where d.id = o.id and d.attempts = o.attempt and d.state = 'pending'
       returning d.endpoint_id, o.delivered, o.gone, o.retry_at
     ), verdict as (
       select s.endpoint_id,
         count(*) filter (where s.delivered or s.retry_at is null)::int as done,
         bool_or(s.delivered) as succeeded,
         bool_or(not s.delivered) as failed,
         case
           when bool_or(s.gone) then 'gone'
           when not bool_or(s.delivered) and min(w.failing_since) < now() - ? * interval '1 millisecond' then 'failing'
         end as reason,
         bool_and(w.enabled) as was_enabled
       from settled s join webhook_endpoints w on w.id = s.endpoint_id
       group by s.endpoint_id
     ), changed as (
       update webhook_endpoints w set
         pending = w.pending - v.done,
         failing_since = case when v.succeeded then null when v.failed then coalesce(w.failing_since, now()) else w.failing_since end,
         enabled = w.enabled and v.reason is null,
         disabled_reason = coalesce(v.reason, w.disabled_reason),
         disabled_at = case when v.reason is not null and w.enabled then now() else w.disabled_at end
       from verdict v where w.id = v.endpoint_id
       returning w.id, w.project_id, w.url, w.format, v.reason, v.was_enabled
     ), turned_off as (
       select id, project_id, url, format, reason from changed where reason is not null and was_enabled
     ), noticed as (${disabledNotices('turned_off', 'reason')})
     select id, project_id as "projectId", url, format, reason from turned_off`,
    [...OUTCOMES.params(outcomes), failingForMs],
  );
}

/**
 * Writes the outcome of an attempt a member asked for (a retry now), whatever the delivery's
 * state: the log gains it, and a success makes the delivery `delivered` (taking it from the
 * endpoint's `pending` if it was waiting). A failure changes neither state nor schedule.
 */
export async function recordManualAttempt(em: EntityManager, id: string, entry: AttemptEntry, delivered: boolean): Promise<void> {
  await query(
    em,
    `with before as (select state from webhook_deliveries where id = ? for update),
     changed as (
       update webhook_deliveries d set
         log = jsonb_path_query_array(jsonb_build_array(?::jsonb) || d.log, '$[0 to ${KEPT_ATTEMPTS - 1}]'),
         state = case when ? then 'delivered' else d.state end,
         next_attempt_at = case when ? then null else d.next_attempt_at end
       where d.id = ? returning d.endpoint_id
     )
     update webhook_endpoints w set pending = w.pending - 1, failing_since = null
     from changed c, before b where w.id = c.endpoint_id and ? and b.state = 'pending'`,
    [id, JSON.stringify(entry), delivered, delivered, id, delivered],
  );
}

// ---------- The delivery log ----------

export interface DeliveryRow extends QueuedDelivery {
  state: 'pending' | 'delivered' | 'failed';
  nextAttemptAt: Date | null;
  log: AttemptEntry[];
}

/** The columns of `DeliveryRow`, from DELIVERIES. */
const DELIVERY = rowReader<DeliveryRow>({
  id: 'd.id',
  endpointId: 'd.endpoint_id',
  projectId: 'w.project_id',
  type: 'd.type',
  eventId: 'd.event_id',
  payload: 'd.payload',
  state: 'd.state',
  nextAttemptAt: time('d.next_attempt_at'),
  log: 'd.log',
  createdAt: time('d.created_at'),
});
const DELIVERIES = 'from webhook_deliveries d join webhook_endpoints w on w.id = d.endpoint_id';

/** At most `limit` of the endpoint's deliveries, newest first, below the id `below` when given. */
export async function deliveryPage(
  em: EntityManager,
  endpointId: string,
  below: string | undefined,
  limit: number,
): Promise<DeliveryRow[]> {
  const rows = await query(
    em,
    below === undefined
      ? `select ${DELIVERY.select} ${DELIVERIES} where d.endpoint_id = ? order by d.id desc limit ?`
      : `select ${DELIVERY.select} ${DELIVERIES} where d.endpoint_id = ? and d.id < ? order by d.id desc limit ?`,
    below === undefined ? [endpointId, limit] : [endpointId, below, limit],
  );
  return rows.map(DELIVERY.read);
}

/** The endpoint's delivery `id`, or null. */
export async function findDelivery(em: EntityManager, endpointId: string, id: string): Promise<DeliveryRow | null> {
  const [row] = await query(em, `select ${DELIVERY.select} ${DELIVERIES} where d.id = ? and d.endpoint_id = ?`, [id, endpointId]);
  return row ? DELIVERY.read(row) : null;
}

/** Deletes at most `limit` deliveries settled (delivered or failed) whose id is below `idBelow`, oldest first; how many it deleted. */
export async function deleteSettledDeliveries(em: EntityManager, idBelow: string, limit: number): Promise<number> {
  const [row] = await query<{ n: number }>(
    em,
    `with gone as (
       delete from webhook_deliveries where id = any(array(
         select id from webhook_deliveries where id < ?::uuid and state <> 'pending' order by id limit ? for update skip locked
       )) returning 1
     )
     select count(*)::int as n from gone`,
    [idBelow, limit],
  );
  return row!.n;
}

/** The project's owner's e-mail address and the project's namespace, for a notice. */
export async function ownerOf(em: EntityManager, projectId: string): Promise<{ email: string; namespace: string } | undefined> {
  const [row] = await query<{ email: string; namespace: string }>(
    em,
    `select u.email, p.namespace from projects p join project_members m on m.project_id = p.id and m.role = 'owner'
     join users u on u.id = m.user_id where p.id = ?`,
    [projectId],
  );
  return row;
}

/**
 * Vacuums the deliveries' table, unless another vacuum of it is under way. A queue leaves two dead
 * versions of every row (claimed, settled) in the index that claims walk, and under a steady stream
 * of inserts the index's own clean-up hints seldom stick: without a vacuum every claim would step
 * over all of them. Autovacuum may be off, or a minute away; the deliverer calls this itself.
 */
export async function vacuumDeliveries(em: EntityManager): Promise<void> {
  await query(em, 'vacuum (skip_locked) webhook_deliveries', []);
}
