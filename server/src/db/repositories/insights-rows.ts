/**
 * The insights aggregate: every read and write of `insights` (docs/development.md, Layers).
 * MikroORM's unit of work creates, loads and changes them; three statements are written out because
 * a filter object cannot say them: the atomic increment, a group of increments with their activity
 * records, and the delete that names what it removed.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { v7 } from 'uuid';
import { Insight, type InsightValue, type Project } from '../entities.js';
import { findPage, type PageRequest } from '../page.js';
import { afterCommit } from '../commit-notices.js';
import { query } from '../raw.js';
import { unnestRows } from '../columns.js';
import { queueChangeCtes } from './webhook-outbox.js';

/** An insight as its answer shows it: the managed entity, or the row a group of increments answered. */
export type InsightView = Pick<Insight, 'id' | 'title' | 'value' | 'emoji' | 'createdAt' | 'updatedAt'>;

/** How many insights the project has. */
export function countInsights(em: EntityManager, projectId: string): Promise<number> {
  return em.count(Insight, { project: projectId });
}

/** Whether the project has the insight `id`. */
export async function insightExists(em: EntityManager, projectId: string, id: string): Promise<boolean> {
  return (await em.count(Insight, { id, project: projectId })) > 0;
}

/**
 * The project's oldest insight titled `title` (ids are UUID v7, so the lowest id is the oldest), or
 * null. Titles need not be unique: the native routes may have made several.
 */
export function oldestInsightTitled(em: EntityManager, projectId: string, title: string): Promise<Insight | null> {
  return em.findOne(Insight, { project: projectId, title }, { orderBy: { id: 'asc' } });
}

/** A new insight of the project, written at once. */
export async function insertInsight(
  em: EntityManager,
  project: Project,
  fields: { title: string; value: InsightValue; emoji: string | null },
): Promise<Insight> {
  const insight = em.create(Insight, { project, ...fields });
  await em.flush();
  return insight;
}

/** A page of the project's insights, newest first. */
export function insightPage(em: EntityManager, projectId: string, page: PageRequest): Promise<Insight[]> {
  return findPage(em, Insight, { project: projectId }, page);
}

/**
 * Sets what is given of the insight's title, value and emoji on the insight read afresh (so that an
 * increment just made shows), written at once: the insight as stored, or null when the project has
 * no such insight.
 */
export async function updateInsightFields(
  em: EntityManager,
  projectId: string,
  id: string,
  changes: { title?: string; value?: InsightValue; emoji?: string | null },
): Promise<Insight | null> {
  const insight = await em.findOne(Insight, { id, project: projectId }, { refresh: true });
  if (!insight) return null;
  if (changes.title !== undefined) insight.title = changes.title;
  if (changes.value !== undefined) insight.value = changes.value;
  if (changes.emoji !== undefined) insight.emoji = changes.emoji;
  await em.flush();
  return insight;
}

const INCREMENT = `update insights set value = to_jsonb((value #>> '{}')::numeric + ?::numeric), updated_at = now()
  where id = ? and project_id = ? and jsonb_typeof(value) = 'number'
  returning true as is_number`;

/**
 * Adds `by` to the insight's value in one statement, so concurrent increments serialise on the row
 * and none is lost. False when the project has no such insight or its value is not a number.
 */
export async function incrementInsightValue(tx: EntityManager, projectId: string, id: string, by: number): Promise<boolean> {
  return (await query(tx, INCREMENT, [by, id, projectId])).length > 0;
}

/** What a group of increments made: the insight and each increment's value, or why nothing was. */
export type IncrementGroupResult =
  { applied: true; insight: Omit<InsightView, 'value'>; values: number[] } | { applied: false; projectFound: boolean };

// One statement, its own transaction: the project's row KEY SHARE first (p: the update's filter
// needs its id, so no insight row is locked before it, the order transaction.ts sets), the sum of
// the group's amounts added to the value at once (u, on the row as it is when its lock is granted,
// so it composes with every other writer, on any instance), one activity record per increment (a,
// none when u changed nothing), and each increment's value as if they had run one after another:
// the total, minus the group's sum, plus the amounts up to and including it. All in numeric, as a
// single increment is computed, so 0.1 + 0.2 answers 0.3. One `insight.updated` webhook delivery
// for the group (db/repositories/webhook-outbox.ts), `data` the insight as presenters/project-presenters.ts
// `presentInsight` shows it after the group (times as JavaScript's toISOString writes them).
const ISO = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const INSIGHT_AS_SHOWN = `(select jsonb_build_object('id', u.id, 'title', u.title, 'value', to_jsonb(u.total), 'emoji', u.emoji,
  'created_at', ${ISO('u.created_at')}, 'updated_at', ${ISO('u.updated_at')}) from u)`;
// The group's activity records, one per increment, as a row source of INCREMENT_GROUP.
const RECORDS = unnestRows<{ id: string; actorId: string | null }>('r', { id: ['id', 'uuid'], actorId: ['actor_id', 'uuid'] });
const INCREMENT_GROUP = `with p as (select id from projects where id = ? for key share),
  b as (select amount, ord from unnest(?::numeric[]) with ordinality as b(amount, ord)),
  t as (select sum(amount) as total from b),
  u as (update insights set value = to_jsonb((value #>> '{}')::numeric + (select total from t)), updated_at = now()
    where id = ? and project_id = (select id from p) and jsonb_typeof(value) = 'number'
    returning id, project_id, title, emoji, created_at, updated_at, (value #>> '{}')::numeric as total),
  a as (insert into activity (${RECORDS.columns}, project_id, type, data, created_at)
    select r.*, u.project_id, ?::text, ?::jsonb, ?::timestamptz from u, ${RECORDS.source}),
  ${queueChangeCtes('(select project_id from u)', "'insight.updated'::text", INSIGHT_AS_SHOWN)}
  select exists (select 1 from p) as project_found, u.id, u.title, u.emoji,
    to_json(u.created_at) #>> '{}' as created_at, to_json(u.updated_at) #>> '{}' as updated_at,
    (select jsonb_agg(to_jsonb(u.total - (select total from t) + s.running) order by s.ord)
      from (select ord, sum(amount) over (order by ord) as running from b) s) as running_values
  from (values (1)) as one (x) left join u on true`;

interface IncrementGroupRow {
  project_found: boolean;
  id: string | null;
  title: string;
  emoji: string | null;
  created_at: string;
  updated_at: string;
  running_values: number[];
}

/**
 * Adds every amount of `increments`, in order, to the insight's numeric value, and writes one
 * activity record (`record`, by the increment's actor) per increment, ids in the same order: one
 * statement that is a transaction of its own (autocommit; `em` must not be in one), so all of it
 * or nothing is stored, and a run again after a deadlock adds nothing twice. Answers the insight
 * and the value after each increment; or, when nothing was changed, whether the project exists
 * (the insight then does not, or its value is not a number: `insightValueType` says which).
 */
export async function incrementInsightGroup(
  em: EntityManager,
  projectId: string,
  insightId: string,
  increments: { by: number; actorId: string | null }[],
  record: { type: string; data: Record<string, unknown> },
): Promise<IncrementGroupResult> {
  if (em.isInTransaction()) throw new Error('a group of increments is a transaction of its own');
  const now = new Date();
  const [row] = await query<IncrementGroupRow>(em, INCREMENT_GROUP, [
    projectId,
    increments.map((increment) => increment.by),
    insightId,
    record.type,
    JSON.stringify(record.data),
    now,
    ...RECORDS.params(increments.map((increment) => ({ id: v7(), actorId: increment.actorId }))),
  ]);
  if (!row || row.id === null) return { applied: false, projectFound: row?.project_found ?? false };
  // The statement queued the group's `insight.updated` delivery (when an endpoint wants it).
  afterCommit(em, { kind: 'deliveries-queued' });
  return {
    applied: true,
    insight: { id: row.id, title: row.title, emoji: row.emoji, createdAt: new Date(row.created_at), updatedAt: new Date(row.updated_at) },
    values: row.running_values,
  };
}

const VALUE_TYPE = `select jsonb_typeof(value) as type from insights where id = ? and project_id = ?`;

/** The JSON type of the insight's value (`number`, `string`, `boolean`), or undefined when the project has no such insight. */
export async function insightValueType(em: EntityManager, projectId: string, id: string): Promise<string | undefined> {
  const [row] = await query<{ type: string }>(em, VALUE_TYPE, [id, projectId]);
  return row?.type;
}

const DELETE = 'delete from insights where id = ? and project_id = ? returning title';

/** Deletes the insight and answers its title; undefined when the project has no such insight (any more). */
export async function deleteInsightRow(tx: EntityManager, projectId: string, id: string): Promise<string | undefined> {
  const [deleted] = await query<{ title: string }>(tx, DELETE, [id, projectId]);
  return deleted?.title;
}
