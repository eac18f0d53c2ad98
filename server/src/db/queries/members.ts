/** What a project's membership cap counts: its members and its pending invites together. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

const MEMBERS_AND_INVITES = `select (select count(*) from project_members where project_id = ?)::int
  + (select count(*) from project_invites where project_id = ?)::int as n`;

/** The project's members plus its pending invites, in one statement. */
export async function countMembersAndInvites(em: EntityManager, projectId: string): Promise<number> {
  const [row] = await query<{ n: number }>(em, MEMBERS_AND_INVITES, [projectId, projectId]);
  return row!.n;
}
