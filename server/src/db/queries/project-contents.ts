/**
 * A project's contents as its answers show them: the members (with their users, by joining time;
 * the presenter puts the owner first) and the feeds (by creation). Shared by the statement that
 * reads one project for its caller and the one that reads a page of projects.
 */
import type { Feed, ProjectMember } from '../entities.js';

/** A member as a project's answer shows it. */
export interface MemberRow {
  id: string;
  username: string;
  icon: string | null;
  role: ProjectMember['role'];
}

/** A feed as a project's answer shows it. */
export type FeedRow = Pick<Feed, 'id' | 'name' | 'description' | 'emoji' | 'type'>;

export interface ProjectContents {
  members: MemberRow[];
  feeds: FeedRow[];
}

/**
 * The contents of the project aliased `p`, as two columns, `members` and `feeds`: PostgreSQL
 * aggregates the rows into JSON arrays, so a project's contents come in its own row whatever their
 * size.
 */
export const PROJECT_CONTENTS = `
  coalesce((select json_agg(json_build_object('id', u.id, 'username', u.username, 'icon', u.icon, 'role', m.role) order by m.created_at, m.id)
            from project_members m join users u on u.id = m.user_id where m.project_id = p.id), '[]') as members,
  coalesce((select json_agg(json_build_object('id', f.id, 'name', f.name, 'description', f.description, 'emoji', f.emoji, 'type', f.type) order by f.created_at, f.id)
            from feeds f where f.project_id = p.id), '[]') as feeds`;
