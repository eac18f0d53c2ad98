/**
 * The projects aggregate: projects with their members, invites and feeds as answers show them,
 * access to a project (the project a route names and the caller's role in it), and who may still
 * watch a project's event stream. Every read and write of those tables the domain makes is here
 * (docs/development.md, Layers), but the row locks (row-locks.ts, through transaction.ts).
 *
 * The statements every project route runs (access) and those that fill a project's answer with its
 * members and feeds are written out (raw.ts says why not `find`); the rest goes through MikroORM's
 * unit of work, which writes what the domain added at `writeChanges` (db/transaction.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, Project, ProjectInvite, ProjectMember, type User } from '../entities.js';
import { afterCommit } from '../commit-notices.js';
import { findPage, type PageRequest } from '../page.js';
import { mapRow, plainRow, query, selectColumns, sqlOnce } from '../raw.js';
import { liveCredential, type CredentialKind } from './accounts-rows.js';

/** A member's role in a project (the `project_members.role` column's values). */
export type MemberRole = ProjectMember['role'];

// ---------- A project's contents, as its answers show them ----------

/** A member as a project's answer shows it. */
export interface MemberRow {
  id: string;
  username: string;
  icon: string | null;
  role: MemberRole;
}

/** A feed as a project's answer shows it. */
export type FeedRow = Pick<Feed, 'id' | 'name' | 'description' | 'emoji' | 'type'>;

export interface ProjectContents {
  members: MemberRow[];
  feeds: FeedRow[];
}

/** A project's own fields an answer shows: a managed entity, or a plain row (`plainProject`). */
export type ProjectFields = Pick<Project, 'id' | 'namespace' | 'name' | 'icon' | 'tier' | 'billingId' | 'createdAt'>;

/**
 * The contents of the project aliased `p`, as two columns, `members` (with their users, by joining
 * time; the presenter puts the owner first) and `feeds` (by creation): PostgreSQL aggregates the
 * rows into JSON arrays, so a project's contents come in its own row whatever their size. Shared by
 * the statement that reads one project for its caller and the one that reads a page of projects.
 */
const PROJECT_CONTENTS = `
  coalesce((select json_agg(json_build_object('id', u.id, 'username', u.username, 'icon', u.icon, 'role', m.role) order by m.created_at, m.id)
            from project_members m join users u on u.id = m.user_id where m.project_id = p.id), '[]') as members,
  coalesce((select json_agg(json_build_object('id', f.id, 'name', f.name, 'description', f.description, 'emoji', f.emoji, 'type', f.type) order by f.created_at, f.id)
            from feeds f where f.project_id = p.id), '[]') as feeds`;

/** A project's id with its contents. */
export interface ProjectContentsById extends ProjectContents {
  id: string;
}

const CONTENTS_WITHIN = `select id, members, feeds from (
    select c.id, c.ord, c.members, c.feeds, sum(octet_length(c.members::text) + octet_length(c.feeds::text)) over (order by c.ord) as bytes
    from (select p.id, p.ord, ${PROJECT_CONTENTS} from unnest(?::uuid[]) with ordinality as p(id, ord)) c
  ) sized
  where ord = 1 or bytes <= ?`;

/**
 * The contents of the projects `ids`, in one statement whatever the number of projects, members and
 * feeds, taken in order while they fill at most `budgetBytes` (measured as PostgreSQL writes them):
 * the first project always comes, and those after the one that would pass the budget are left out.
 * Rows come in no particular order.
 */
export function projectContentsWithin(em: EntityManager, ids: string[], budgetBytes: number): Promise<ProjectContentsById[]> {
  return query<ProjectContentsById>(em, CONTENTS_WITHIN, [ids, budgetBytes]);
}

// ---------- Access: the project a route names, and the caller's role in it ----------

/** The project's columns (prefixed `p__`) and the caller's role in it, null when not a member. */
export type ProjectRoleRow = { member_role: MemberRole | null; p__id: string } & Record<string, unknown>;

/** A `ProjectRoleRow` with the project's members and feeds. */
export type ProjectContentsRow = ProjectRoleRow & ProjectContents;

/**
 * One statement whatever the project's size: with `contents`, PostgreSQL aggregates the members
 * and feeds into the project's own row. Every project route runs it, so it is written out; its text
 * is built once per shape (`sqlOnce`).
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
export function plainProject(em: EntityManager, row: ProjectRoleRow): ProjectFields {
  return plainRow(em, Project, row, 'p') as ProjectFields;
}

/**
 * The role of `userId` in the project as the database has it now; undefined when it is not a
 * member. Written out rather than `findOne`: a membership the unit of work already holds would be
 * answered as it was loaded, and this is asked under the project's lock precisely because that
 * may be stale.
 */
export async function findMemberRole(em: EntityManager, projectId: string, userId: string): Promise<MemberRole | undefined> {
  const [row] = await query<{ role: MemberRole }>(em, 'select role from project_members where project_id = ? and user_id = ?', [
    projectId,
    userId,
  ]);
  return row?.role;
}

// ---------- Projects ----------

/** The project `id`; fails when there is none (the caller holds its lock, or just wrote it). */
export function getProject(em: EntityManager, id: string): Promise<Project> {
  return em.findOneOrFail(Project, { id });
}

/** The project `id` as the database has it now, over what the unit of work holds (read under the project's lock). */
export function getProjectAfresh(tx: EntityManager, id: string): Promise<Project> {
  return tx.findOneOrFail(Project, { id }, { refresh: true });
}

/**
 * A page of the projects `userId` is a member of, newest first (one more than asked: `findPage`);
 * with `among`, only those of these ids.
 */
export function memberProjectsPage(em: EntityManager, userId: string, page: PageRequest, among?: Iterable<string>): Promise<Project[]> {
  return findPage(em, Project, { members: { user: userId }, ...(among === undefined ? {} : { id: { $in: [...among] } }) }, page);
}

/** Of the projects named `namespaces`, those `userId` is a member of: their ids by namespace. */
export async function memberProjectIds(em: EntityManager, userId: string, namespaces: string[]): Promise<Map<string, string>> {
  const rows = await query<{ id: string; namespace: string }>(
    em,
    `select p.id, p.namespace from projects p
     where p.namespace = any(?::text[]) and exists (select 1 from project_members m where m.project_id = p.id and m.user_id = ?)`,
    [namespaces, userId],
  );
  return new Map(rows.map((row) => [row.namespace, row.id]));
}

/** How many projects `userId` owns. */
export function countOwnedProjects(em: EntityManager, userId: string): Promise<number> {
  return em.count(ProjectMember, { user: userId, role: 'owner' });
}

/**
 * A new project owned by `owner`, with its first feed (`general`), added to the unit of work: written
 * at `writeChanges`, where a taken namespace is refused.
 */
export function addProject(tx: EntityManager, owner: User, fields: { namespace: string; name: string; icon: string | null }): Project {
  const project = tx.create(Project, { ...fields, tier: 0, billingId: null });
  tx.create(ProjectMember, { project, user: owner, role: 'owner' });
  tx.create(Feed, { project, name: 'general', description: null, emoji: null, type: 0 });
  return project;
}

/** The project `id` as a reference (nothing is read), for a row that points at it. */
export function projectReference(em: EntityManager, id: string): Project {
  return em.getReference(Project, id);
}

/**
 * Deletes the project and, by the schema's cascades, everything attached to it, in one statement;
 * once that commits, every instance ends the project's live streams.
 */
export async function deleteProjectRow(tx: EntityManager, id: string): Promise<void> {
  await tx.nativeDelete(Project, { id });
  afterCommit(tx, { kind: 'project-deleted', projectId: id });
}

// ---------- Members ----------

/** The membership of `userId` in the project (in `role`, when given), or null. */
export function findMembership(em: EntityManager, projectId: string, userId: string, role?: MemberRole): Promise<ProjectMember | null> {
  return em.findOne(ProjectMember, { project: projectId, user: userId, ...(role === undefined ? {} : { role }) });
}

/** The membership of the user named `username` (lower-case) in the project, with its user, or null. */
export function findMembershipByUsername(em: EntityManager, projectId: string, username: string): Promise<ProjectMember | null> {
  return em.findOne(ProjectMember, { project: projectId, user: { username } }, { populate: ['user'] });
}

/** Whether `userId` is a member of the project. */
export async function isMember(em: EntityManager, projectId: string, userId: string): Promise<boolean> {
  return (await em.count(ProjectMember, { project: projectId, user: userId })) > 0;
}

/** A new membership, added to the unit of work (written at `writeChanges`). */
export function addMembership(tx: EntityManager, project: Project, user: User, role: MemberRole): ProjectMember {
  return tx.create(ProjectMember, { project, user, role });
}

/** Sets a membership's role, at once. */
export async function setMemberRole(tx: EntityManager, membershipId: string, role: MemberRole): Promise<void> {
  await tx.nativeUpdate(ProjectMember, { id: membershipId }, { role });
}

/** Deletes a membership: whether it was still there (of concurrent removals, one finds it). */
export async function deleteMembership(tx: EntityManager, membershipId: string): Promise<boolean> {
  return (await tx.nativeDelete(ProjectMember, { id: membershipId })) > 0;
}

/** The places of `userId` in projects it does not own. */
export function membershipsOf(em: EntityManager, userId: string): Promise<ProjectMember[]> {
  return em.find(ProjectMember, { user: userId, role: 'member' });
}

const MEMBERS_AND_INVITES = `select (select count(*) from project_members where project_id = ?)::int
  + (select count(*) from project_invites where project_id = ?)::int as n`;

/** What a project's membership cap counts: its members plus its pending invites, in one statement. */
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

// ---------- Invites ----------

/** Whether `userId` has a pending invite to the project. */
export async function hasPendingInvite(em: EntityManager, projectId: string, userId: string): Promise<boolean> {
  return (await em.count(ProjectInvite, { project: projectId, user: userId })) > 0;
}

/** The pending invite of `userId` to the project, as a managed entity (accepting it deletes it). */
export async function findPendingInvite(em: EntityManager, projectId: string, userId: string): Promise<ProjectInvite | undefined> {
  return (await em.findOne(ProjectInvite, { project: projectId, user: userId })) ?? undefined;
}

/** A new invite of `invitee` by `invitedBy`, added to the unit of work (written at `writeChanges`). */
export function addInvite(tx: EntityManager, project: Project, invitee: User, invitedBy: User): ProjectInvite {
  return tx.create(ProjectInvite, { project, user: invitee, invitedBy });
}

/** A page of the project's pending invites, newest first, with their users and inviters. */
export function projectInvitePage(em: EntityManager, projectId: string, page: PageRequest): Promise<ProjectInvite[]> {
  return findPage(em, ProjectInvite, { project: projectId }, page, { populate: ['user', 'invitedBy'] });
}

/** A page of the invites `userId` received, newest first, with their projects and inviters. */
export function receivedInvitePage(em: EntityManager, userId: string, page: PageRequest): Promise<ProjectInvite[]> {
  return findPage(em, ProjectInvite, { user: userId }, page, { populate: ['project', 'invitedBy'] });
}

/** Deletes an invite: whether it was still there (of concurrent accepts or revokes, one finds it). */
export async function deleteInviteById(tx: EntityManager, inviteId: string): Promise<boolean> {
  return (await tx.nativeDelete(ProjectInvite, { id: inviteId })) > 0;
}

/** Deletes the pending invite of `userId` to the project: whether there was one. */
export async function deleteInviteOf(tx: EntityManager, projectId: string, userId: string): Promise<boolean> {
  return (await tx.nativeDelete(ProjectInvite, { project: projectId, user: userId })) > 0;
}

/** The pending invites `userId` received. */
export function invitesReceivedBy(em: EntityManager, userId: string): Promise<ProjectInvite[]> {
  return em.find(ProjectInvite, { user: userId });
}

/** The pending invites to the project that `userId` sent, with their invitees. */
export function invitesSentIn(em: EntityManager, projectId: string, userId: string): Promise<ProjectInvite[]> {
  return em.find(ProjectInvite, { project: projectId, invitedBy: userId }, { populate: ['user'] });
}

/** The pending invites `userId` sent to others, with their invitees. */
export function invitesSentBy(em: EntityManager, userId: string): Promise<ProjectInvite[]> {
  return em.find(ProjectInvite, { invitedBy: userId, user: { $ne: userId } }, { populate: ['user'] });
}

// ---------- Who may still watch a project's event stream ----------

/** Who watches a project's stream, through which credential. */
export interface StreamViewer {
  projectId: string;
  userId: string;
  credentialId: string;
  credentialKind: CredentialKind;
}

const STILL_ALLOWED = `
  select v.i from unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::text[]) with ordinality as v(project_id, user_id, credential_id, kind, i)
  where exists (select 1 from project_members m where m.project_id = v.project_id and m.user_id = v.user_id)
    and (exists (select 1 from sessions s where v.kind = 'session' and s.id = v.credential_id and ${liveCredential('s')})
      or exists (select 1 from api_tokens t where v.kind = 'api' and t.id = v.credential_id and ${liveCredential('t')}))`;

/**
 * The positions (from 0) in `viewers` of those still allowed: still a member of the project, and
 * the credential that opened the stream still exists and has not expired. One statement however
 * many viewers there are.
 */
export async function viewersStillAllowedAmong(em: EntityManager, viewers: readonly StreamViewer[]): Promise<Set<number>> {
  const rows = await query<{ i: string }>(em, STILL_ALLOWED, [
    viewers.map((v) => v.projectId),
    viewers.map((v) => v.userId),
    viewers.map((v) => v.credentialId),
    viewers.map((v) => v.credentialKind),
  ]);
  return new Set(rows.map((row) => Number(row.i) - 1));
}
