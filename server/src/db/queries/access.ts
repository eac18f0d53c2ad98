/**
 * The statements access to a project is decided on: the project a route names with the caller's
 * role in it, optionally with the project's contents, and the caller's pending invite to it. Every
 * project route runs the first, so it is written out (raw.ts says why not `find`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Project, ProjectInvite, type ProjectMember } from '../entities.js';
import { mapRow, plainRow, query, selectColumns, sqlOnce } from '../raw.js';
import { PROJECT_CONTENTS, type ProjectContents } from './project-contents.js';

/** The project's columns (prefixed `p__`) and the caller's role in it, null when not a member. */
export type ProjectRoleRow = { member_role: ProjectMember['role'] | null; p__id: string } & Record<string, unknown>;

/** A `ProjectRoleRow` with the project's members and feeds. */
export type ProjectContentsRow = ProjectRoleRow & ProjectContents;

/**
 * One statement whatever the project's size: with `contents`, PostgreSQL aggregates the members
 * and feeds into the project's own row. Its text is built once per shape (`sqlOnce`).
 */
async function projectRow<T extends ProjectRoleRow>(
  em: EntityManager,
  userId: string,
  namespace: string,
  contents: boolean,
): Promise<T | undefined> {
  const sql = sqlOnce(
    contents ? 'project:contents' : 'project',
    () =>
      `select ${selectColumns(em, Project, 'p', 'p')}, m.role as member_role${contents ? `, ${PROJECT_CONTENTS}` : ''}
     from projects p left join project_members m on m.project_id = p.id and m.user_id = ?
     where p.namespace = ?`,
  );
  const [row] = await query<T>(em, sql, [userId, namespace]);
  return row;
}

/** The project with this namespace and the role of `userId` in it; undefined when there is no such project. */
export function findProjectWithRole(em: EntityManager, userId: string, namespace: string): Promise<ProjectRoleRow | undefined> {
  return projectRow<ProjectRoleRow>(em, userId, namespace, false);
}

/** `findProjectWithRole` with the project's members and feeds, in the same statement. */
export function findProjectWithRoleAndContents(
  em: EntityManager,
  userId: string,
  namespace: string,
): Promise<ProjectContentsRow | undefined> {
  return projectRow<ProjectContentsRow>(em, userId, namespace, true);
}

/** The row's project as the managed entity (merged into the request's identity map), for a route that changes it. */
export function projectEntity(em: EntityManager, row: ProjectRoleRow): Project {
  return mapRow(em, Project, row, 'p');
}

/** The row's project as a plain object of its properties, for an answer that only shows it. */
export function plainProject(em: EntityManager, row: ProjectRoleRow): Record<string, unknown> {
  return plainRow(em, Project, row, 'p');
}

/** The pending invite of `userId` to the project, as a managed entity (accepting it deletes it). */
export async function findPendingInvite(em: EntityManager, projectId: string, userId: string): Promise<ProjectInvite | undefined> {
  return (await em.findOne(ProjectInvite, { project: projectId, user: userId })) ?? undefined;
}
