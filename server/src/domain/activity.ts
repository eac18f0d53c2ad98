/** The project's append-only log. Records are written with the change they describe, in its transaction. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Activity, User, type Project } from '../db/entities.js';
import { decodeCursor, type PageRequest } from './pagination.js';
import { mapRow, query, selectColumns } from './rows.js';

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

/**
 * A page of the log, newest first, each record with its actor: one hand-written statement (rows.ts)
 * walking the (project_id, id) index from the cursor, so a page costs the same at any depth.
 */
export async function listActivity(em: EntityManager, project: Project, page: PageRequest): Promise<Activity[]> {
  const below = decodeCursor(page.cursor);
  const rows = await query(
    em,
    `select ${selectColumns(em, Activity, 'a', 'a')}, ${selectColumns(em, User, 'u', 'u')}
     from activity a left join users u on u.id = a.actor_id
     where a.project_id = ?${below ? ' and a.id < ?' : ''} order by a.id desc limit ?`,
    below ? [project.id, below, page.limit + 1] : [project.id, page.limit + 1],
  );
  return rows.map((row) => {
    if (row.u__id !== null) mapRow(em, User, row, 'u');
    return mapRow(em, Activity, row, 'a');
  });
}
