/**
 * The activity aggregate: a project's append-only log (docs/development.md, Layers). A record joins
 * the unit of work of the change it describes and is written by that transaction's flush; a page of
 * the log is one statement walking the (project_id, id) index from the cursor, so a page costs the
 * same at any depth. Written out (raw.ts says why not `find`); the records are plain values, since
 * a page is only read.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Activity, type Project, type User } from '../entities.js';
import { query } from '../raw.js';
import { rowReader, time } from '../columns.js';

/**
 * Adds a record to the unit of work of `em`: the next flush writes it (a transaction flushes before
 * it commits), or nothing does, when the transaction fails.
 */
export function addActivityRecord(
  em: EntityManager,
  record: { project: Project; actor: User | null; type: string; data: Record<string, unknown> },
): void {
  em.create(Activity, record);
}

/** A log record as its answer shows it. */
export interface ActivityRow {
  id: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
  actor: { id: string; username: string; icon: string | null } | null;
}

const RECORD = rowReader<ActivityRow>({
  id: 'a.id',
  type: 'a.type',
  data: 'a.data',
  createdAt: time('a.created_at'),
  actor: "case when u.id is null then null else json_build_object('id', u.id, 'username', u.username, 'icon', u.icon) end",
});

const page = (cursor: string) => `select ${RECORD.select}
  from activity a left join users u on u.id = a.actor_id
  where a.project_id = ?${cursor} order by a.id desc limit ?`;
const FIRST_PAGE = page('');
const PAGE_BELOW = page(' and a.id < ?');

/** At most `limit` records of the project's log, newest first, below the id `below` when given. */
export async function activityPage(em: EntityManager, projectId: string, below: string | undefined, limit: number): Promise<ActivityRow[]> {
  const rows = await query(em, below ? PAGE_BELOW : FIRST_PAGE, below ? [projectId, below, limit] : [projectId, limit]);
  return rows.map(RECORD.read);
}
