/**
 * Who may do what on a project: the one table of rules every project route goes through.
 *
 * - A project the caller is not a member of does not exist for it: 404, whatever the action, so a
 *   non-member never learns that a namespace is in use by probing routes.
 * - A member asking for an owner's action gets 403 `not_owner`.
 * - A pending invitee is not a member: it reaches only its own invite (accept, decline).
 * - Which credential kind a route takes (session token or API token too) is not decided here but
 *   by the contract's `x-session-only`, enforced for every route in http/auth.ts before this runs.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Project, ProjectInvite, ProjectMember } from '../db/entities.js';
import type { Caller } from '../domain/credentials.js';
import { type ProjectFields, type ProjectView } from '../domain/projects.js';
import { PROJECT_CONTENTS, type ProjectContents } from '../db/queries/project-contents.js';
import { query } from '../db/raw.js';
import { mapRow, plainRow, selectColumns, sqlOnce } from '../db/raw.js';
import { Forbidden, NotFound } from '../errors.js';

/** Who may act: any member; the owner alone; the owner or the member the route names (leaving);
 * the invitee the route names; the owner or that invitee. */
type Rule = 'member' | 'owner' | 'owner-or-self' | 'invitee' | 'owner-or-invitee';

export const PROJECT_RULES = {
  'project.read': 'member',
  'project.update': 'owner',
  'project.delete': 'owner',
  'member.remove': 'owner-or-self',
  'invite.create': 'owner',
  'invite.list': 'member',
  'invite.accept': 'invitee',
  'invite.delete': 'owner-or-invitee',
  'insight.create': 'member',
  'insight.list': 'member',
  'insight.update': 'member',
  'insight.delete': 'member',
  'activity.list': 'member',
  'feed.list': 'member',
  'feed.create': 'member',
  'feed.update': 'member',
  'feed.delete': 'member',
  'event.publish': 'member',
  'event.list': 'member',
  'event.stream': 'member',
} as const satisfies Record<string, Rule>;

export type ProjectAction = keyof typeof PROJECT_RULES;

export interface ProjectAccess {
  /** The project as a managed entity, mapped on first use (a read that only shows it never maps it). */
  readonly project: Project;
  projectId: string;
  /** The caller's role, or undefined for an invitee acting on its own invite. */
  role: ProjectMember['role'] | undefined;
  /** The caller's pending invite, loaded for the invitee's own invite routes. */
  invite: ProjectInvite | undefined;
}

type ProjectRow = { member_role: ProjectMember['role'] | null; p__id: string } & Partial<ProjectContents> & Record<string, unknown>;

const projectNotFound = () => new NotFound('No project with this namespace.');

/**
 * The project row and the caller's role in it (none when not a member), in one hand-written
 * statement: every project route runs it (rows.ts says why not `findOne`). With `contents`, the
 * same statement also brings the project's members and feeds, for the routes that answer the whole
 * project.
 */
async function projectRow(em: EntityManager, caller: Caller, namespace: string, contents: boolean): Promise<ProjectRow> {
  const sql = sqlOnce(contents ? 'project:contents' : 'project', () =>
    `select ${selectColumns(em, Project, 'p', 'p')}, m.role as member_role${contents ? `, ${PROJECT_CONTENTS}` : ''}
     from projects p left join project_members m on m.project_id = p.id and m.user_id = ?
     where p.namespace = ?`);
  const [row] = await query<ProjectRow>(em, sql, [caller.userId, namespace]);
  if (!row) throw projectNotFound();
  return row;
}

/**
 * Loads the project the route names and checks the caller may do `action` on it; throws 404/403
 * otherwise. `subject` is the username a member or invite route names.
 */
export async function authorize(
  em: EntityManager,
  caller: Caller,
  namespace: string,
  action: ProjectAction,
  subject?: string,
): Promise<ProjectAccess> {
  return permit(em, caller, await projectRow(em, caller, namespace, false), action, subject);
}

/** `authorize` for a route that answers the whole project: one statement brings it all, as plain rows. */
export async function authorizeView(em: EntityManager, caller: Caller, namespace: string, action: ProjectAction): Promise<ProjectAccess & { view: ProjectView }> {
  const row = await projectRow(em, caller, namespace, true);
  const access = await permit(em, caller, row, action);
  // Assigned, not spread: a spread would read the lazy `project` and map it.
  return Object.assign(access, { view: { id: row.p__id, project: plainRow(em, Project, row, 'p') as ProjectFields, members: row.members ?? [], feeds: row.feeds ?? [] } });
}

async function permit(em: EntityManager, caller: Caller, row: ProjectRow, action: ProjectAction, subject?: string): Promise<ProjectAccess> {
  const rule: Rule = PROJECT_RULES[action];
  const role = row.member_role ?? undefined;
  const isSelf = subject !== undefined && subject.toLowerCase() === caller.username;
  const access = (invite?: ProjectInvite): ProjectAccess => new Access(em, row, role, invite);

  if (rule === 'invitee' || rule === 'owner-or-invitee') {
    const invite = isSelf ? (await em.findOne(ProjectInvite, { project: row.p__id, user: caller.userId })) ?? undefined : undefined;
    if (invite) return access(invite);
    if (!role) throw projectNotFound();
    if (isSelf) throw new NotFound('You have no pending invite to this project.');
    if (rule === 'invitee') throw new Forbidden('forbidden', 'Only the invited user can accept an invite.');
    if (role !== 'owner') throw new Forbidden('not_owner', "Only the project's owner can revoke another user's invite.");
    return access();
  }

  if (!role) throw projectNotFound();
  if (rule === 'owner' && role !== 'owner') throw new Forbidden('not_owner', "Only the project's owner can do this.");
  if (rule === 'owner-or-self' && role !== 'owner' && !isSelf) {
    throw new Forbidden('not_owner', "Only the project's owner can remove another member.");
  }
  return access();
}

/** A class for its prototype getter: see `ResolvedCaller` in domain/credentials.ts for why not a literal's. */
class Access implements ProjectAccess {
  readonly projectId: string;
  #project: Project | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly row: ProjectRow,
    readonly role: ProjectMember['role'] | undefined,
    readonly invite: ProjectInvite | undefined,
  ) {
    this.projectId = row.p__id;
  }

  get project(): Project {
    return (this.#project ??= mapRow(this.em, Project, this.row, 'p'));
  }
}
