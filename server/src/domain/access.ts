/**
 * Access to the project a route names: loads the facts the rules need (policies/project.ts) and
 * hands the handler what it may act on; a project outside the projects an API token is limited to
 * is refused as a project the caller is not a member of. The project and the caller's role come in one statement;
 * the caller's pending invite is looked up only on an invite route that names the caller. A write
 * that depends on the caller's role decides again once it holds the project's row lock
 * (`confirmAccess`): the role read here, before any lock, may have changed by then.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Project, ProjectInvite, User } from '../db/entities.js';
import {
  findMemberRole,
  findPendingInvite,
  findProjectWithRole,
  findProjectWithRoleAndContents,
  plainProject,
  projectEntity,
  type ProjectRoleRow,
} from '../db/repositories/projects-rows.js';
import { needsInviteFact, permit, permitProject, type ActingAs, type InviteeAction, type ProjectAction } from '../policies/project.js';
import { Internal, projectNotFound } from '../errors.js';
import type { Scope } from './scope.js';
import type { ProjectView } from './project-view.js';

export interface ProjectAccess {
  /** The project as a managed entity, mapped on first use: a route that needs only its id never maps it. */
  readonly project: Project;
  readonly projectId: string;
  /** The caller's role, or `invitee` for an invitee declining its own invite. */
  readonly actingAs: ActingAs;
}

export interface InviteeAccess extends ProjectAccess {
  /** The caller's pending invite to the project: the invitee's routes act on it. */
  readonly invite: ProjectInvite;
}

/** Every action but the invitee's own, which `inviteeAccess` serves. */
export type MemberAction = Exclude<ProjectAction, InviteeAction>;

/**
 * The project `namespace` names, if the caller may take `action` on it; 404/403 otherwise.
 * `subject` is the username a member or invite route names.
 */
export async function projectAccess(scope: Scope, namespace: string, action: MemberAction, subject?: string): Promise<ProjectAccess> {
  const { row, actingAs } = await decide(scope, namespace, action, subject);
  return new LoadedAccess(scope.em, row, actingAs);
}

/** The invitee `username` names, on its own invite to the project; 404/403 for anyone else, or without an invite. */
export async function inviteeAccess(scope: Scope, namespace: string, action: InviteeAction, username: string): Promise<InviteeAccess> {
  const { row, actingAs, invite } = await decide(scope, namespace, action, username);
  // `permit` lets an invitee's action through only with the caller's own pending invite: a rule that
  // did otherwise is a programming error, refused rather than acted on.
  if (!invite) throw new Internal();
  return new LoadedInviteeAccess(scope.em, row, actingAs, invite);
}

/**
 * The whole project as its read answers it, if the caller may read it; 404 otherwise. One statement
 * brings the project, the caller's role, the members and the feeds, all as plain rows.
 */
export async function projectView({ em, caller }: Scope, namespace: string): Promise<ProjectView> {
  const row = await findProjectWithRoleAndContents(em, caller.userId, namespace);
  if (!row) throw projectNotFound();
  permit('project.read', { role: row.member_role ?? undefined, isSubject: false, hasPendingInvite: false });
  permitProject(caller.grant, row.p__id);
  return { id: row.p__id, project: plainProject(em, row), members: row.members, feeds: row.feeds };
}

/**
 * `action`, on another user or on the project itself, decided again inside `tx` once it holds the
 * project's row lock (transaction.ts): a write that only the owner may make acts on the caller's
 * role as it is under the lock, not as `projectAccess` read it before (a transfer that committed in
 * between, which holds the project's row FOR UPDATE until it commits, has made the caller a member:
 * 403 `not_owner`; or the caller left meanwhile: 404). What the caller may do on itself (leave,
 * decline its invite) needs no role, and is checked by the write that finds its row or not.
 */
export async function confirmAccess(
  tx: EntityManager,
  projectId: string,
  actor: Pick<User, 'id'>,
  action: MemberAction,
): Promise<ActingAs> {
  const role = await findMemberRole(tx, projectId, actor.id);
  return permit(action, { role, isSubject: false, hasPendingInvite: false });
}

/** The facts the rules need, loaded, and the rules' decision on them. */
async function decide({ em, caller }: Scope, namespace: string, action: ProjectAction, subject: string | undefined) {
  const row = await findProjectWithRole(em, caller.userId, namespace);
  if (!row) throw projectNotFound();
  // A project outside an API token's projects does not exist for it, whatever its user's role there.
  permitProject(caller.grant, row.p__id);
  const isSubject = subject !== undefined && subject.toLowerCase() === caller.username;
  const invite = needsInviteFact(action, isSubject) ? await findPendingInvite(em, row.p__id, caller.userId) : undefined;
  const actingAs = permit(action, { role: row.member_role ?? undefined, isSubject, hasPendingInvite: invite !== undefined });
  return { row, actingAs, invite };
}

/**
 * A class for its prototype getter: a getter in an object literal made per request gives each
 * object a hidden class of its own in V8, which keeps the request's objects alive through every
 * young-generation collection (see `ResolvedCaller` in credentials.ts).
 */
class LoadedAccess implements ProjectAccess {
  readonly projectId: string;
  #project: Project | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly row: ProjectRoleRow,
    readonly actingAs: ActingAs,
  ) {
    this.projectId = row.p__id;
  }

  get project(): Project {
    return (this.#project ??= projectEntity(this.em, this.row));
  }
}

class LoadedInviteeAccess extends LoadedAccess implements InviteeAccess {
  constructor(
    em: EntityManager,
    row: ProjectRoleRow,
    actingAs: ActingAs,
    readonly invite: ProjectInvite,
  ) {
    super(em, row, actingAs);
  }
}
