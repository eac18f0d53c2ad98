/** The project's append-only log. Records are written with the change they describe, in its transaction. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Activity, type Project, type User } from '../db/entities.js';
import { decodeCursor, type PageRequest } from './pagination.js';
import { query } from '../db/raw.js';

export type ActivityType =
  | 'project.created'
  | 'project.updated'
  | 'member.joined'
  | 'member.removed'
  | 'member.left'
  | 'invite.created'
  | 'invite.revoked'
  | 'invite.declined'
  | 'insight.created'
  | 'insight.updated'
  | 'insight.deleted'
  | 'feed.created'
  | 'feed.updated'
  | 'feed.deleted'
  | 'billing.changed';

/** Adds a record to the unit of work of `em`: it is written by that transaction's flush, or not at all. */
export function recordActivity(em: EntityManager, project: Project, actor: User | null, type: ActivityType, data: Record<string, unknown>): void {
  em.create(Activity, { project, actor, type, data });
}

/** A log record as its answer shows it: plain values, not managed entities (a page is only read). */
export interface ActivityRow {
  id: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
  actor: { id: string; username: string; icon: string | null } | null;
}

// to_json: the time as ISO 8601, whatever text format the connection's type parsers leave it in.
const activityPage = (cursor: string) => `select a.id, a.type, a.data, to_json(a.created_at) #>> '{}' as created_at, u.id as actor_id, u.username as actor_username, u.icon as actor_icon
  from activity a left join users u on u.id = a.actor_id
  where a.project_id = ?${cursor} order by a.id desc limit ?`;
const ACTIVITY_FIRST = activityPage('');
const ACTIVITY_BELOW = activityPage(' and a.id < ?');

/**
 * A page of the log, newest first, each record with its actor: one hand-written statement (rows.ts)
 * walking the (project_id, id) index from the cursor, so a page costs the same at any depth.
 */
export async function listActivity(em: EntityManager, projectId: string, page: PageRequest): Promise<ActivityRow[]> {
  const below = decodeCursor(page.cursor);
  const rows = await query<{ id: string; type: string; data: Record<string, unknown>; created_at: string; actor_id: string | null; actor_username: string; actor_icon: string | null }>(
    em,
    below ? ACTIVITY_BELOW : ACTIVITY_FIRST,
    below ? [projectId, below, page.limit + 1] : [projectId, page.limit + 1],
  );
  return rows.map((row) => ({
    id: row.id,
    type: row.type,
    data: row.data,
    createdAt: new Date(row.created_at),
    actor: row.actor_id === null ? null : { id: row.actor_id, username: row.actor_username, icon: row.actor_icon },
  }));
}
