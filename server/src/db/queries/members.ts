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

/** A project the user owns, with how many other users are its members. */
export interface OwnedProjectRow {
  id: string;
  namespace: string;
  others: number;
}

const OWNED_PROJECTS = `select p.id, p.namespace,
  (select count(*) from project_members o where o.project_id = p.id and o.user_id <> m.user_id)::int as others
from project_members m join projects p on p.id = m.project_id
where m.user_id = ? and m.role = 'owner'
order by p.id`;

/** The projects the user owns, in id order (the order an account's delete locks them in). */
export async function ownedProjects(em: EntityManager, userId: string): Promise<OwnedProjectRow[]> {
  return query<OwnedProjectRow>(em, OWNED_PROJECTS, [userId]);
}
