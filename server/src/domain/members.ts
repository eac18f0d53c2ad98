/** Membership: invites, accepting them, and leaving or being removed. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ProjectInvite, ProjectMember, User, type Project } from '../db/entities.js';
import { countMembersAndInvites } from '../db/queries/members.js';
import { lockUserRow } from '../db/queries/row-locks.js';
import { Conflict, Forbidden, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { refuseAtCap, type Limits } from './limits.js';
import { findPage, type PageRequest } from '../db/page.js';
import { loadProject, type ProjectView } from './projects.js';
import { lockProject, lockUser, transaction } from '../db/transaction.js';

async function userNamed(em: EntityManager, username: string): Promise<User> {
  const user = await em.findOne(User, { username: username.toLowerCase() });
  if (!user) throw new NotFound('No user with this username.');
  return user;
}

const memberNotFound = () => new NotFound('No member with this username.');

/**
 * The owner removes a member, or a member removes itself (leaves). The owner stays. Returns the
 * removed user's id. Of concurrent removals of one member, only the one whose statement removed
 * the row answers 204 and records it.
 */
export async function removeMember(em: EntityManager, actor: User, project: Project, username: string): Promise<string> {
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    const target = await tx.findOne(ProjectMember, { project, user: { username: username.toLowerCase() } }, { populate: ['user'] });
    if (!target) throw memberNotFound();
    if (target.role === 'owner') throw new Conflict('owner_cannot_leave', 'The owner cannot leave or be removed from its project.');
    if ((await tx.nativeDelete(ProjectMember, { id: target.id })) === 0) throw memberNotFound();
    const leaving = target.user.id === actor.id;
    recordActivity(tx, project, actor, leaving ? 'member.left' : 'member.removed', { username: target.user.username });
    await tx.flush();
    return target.user.id;
  });
}

/**
 * The owner invites a user; 409 `already_member`, `already_invited`, or `limit_reached` when the
 * project's members and pending invites together are as many as it may have (accepting an invite
 * turns one into the other, so the cap is counted here). Invites of a project are created one at a
 * time (the project row FOR NO KEY UPDATE), so these checks and the insert are one step.
 */
export async function createInvite(
  em: EntityManager,
  actor: User,
  project: Project,
  username: string,
  limits: Limits,
): Promise<ProjectInvite> {
  const invitee = await userNamed(em, username);
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'no key update');
    if (await tx.count(ProjectMember, { project, user: invitee })) {
      throw new Conflict('already_member', 'This user is already a member of the project.');
    }
    if (await tx.count(ProjectInvite, { project, user: invitee })) {
      throw new Conflict('already_invited', 'This user already has a pending invite to the project.');
    }
    const n = await countMembersAndInvites(tx, project.id);
    refuseAtCap(limits, 'membersPerProject', n, `This project has ${n} members and pending invites`);
    const invite = tx.create(ProjectInvite, { project, user: invitee, invitedBy: actor });
    recordActivity(tx, project, actor, 'invite.created', { username: invitee.username });
    await tx.flush();
    return invite;
  });
}

export async function listInvites(em: EntityManager, project: Project, page: PageRequest): Promise<ProjectInvite[]> {
  return findPage(em, ProjectInvite, { project }, page, { populate: ['user', 'invitedBy'] });
}

export async function listReceivedInvites(em: EntityManager, user: User, page: PageRequest): Promise<ProjectInvite[]> {
  return findPage(em, ProjectInvite, { user }, page, { populate: ['project', 'invitedBy'] });
}

/**
 * The invitee accepts: the invite becomes a membership in one transaction, which answers the
 * project as it then is (still locked: a concurrent delete waits for it, or it for the delete and
 * then finds no project: 404). The invite row is deleted first, so of two concurrent accepts only
 * one finds it. The invitee's row is locked before the project's, as an account's delete locks it:
 * a membership is either there when the invitee's account is deleted, and given up with a record,
 * or never made (the account, and the credential of this request, are gone: 401).
 */
export async function acceptInvite(em: EntityManager, invitee: User, invite: ProjectInvite): Promise<ProjectView> {
  return transaction(em, async (tx) => {
    await lockUser(tx, invitee.id);
    await lockProject(tx, invite.project.id, 'key share');
    if ((await tx.nativeDelete(ProjectInvite, { id: invite.id })) === 0) throw new NotFound('You have no pending invite to this project.');
    tx.create(ProjectMember, { project: invite.project, user: invitee, role: 'member' });
    recordActivity(tx, invite.project, invitee, 'member.joined', { username: invitee.username });
    await tx.flush();
    return loadProject(tx, invite.project.id);
  });
}

/** The owner revokes an invite, or the invitee declines its own. */
export async function deleteInvite(em: EntityManager, actor: User, project: Project, username: string): Promise<void> {
  await transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    const invitee = await userNamed(tx, username).catch(() => undefined);
    const deleted = invitee ? await tx.nativeDelete(ProjectInvite, { project, user: invitee }) : 0;
    if (deleted === 0) throw new NotFound('No pending invite for this user.');
    const declined = invitee!.id === actor.id;
    recordActivity(tx, project, actor, declined ? 'invite.declined' : 'invite.revoked', { username: invitee!.username });
    await tx.flush();
  });
}

/**
 * The owner hands the project over to another member, who becomes its owner; the old owner stays a
 * member. The users' rows are locked first (in id order, as the cap on owned projects is counted
 * for the new owner), then the project's row FOR UPDATE, so transfers of one project run one at a
 * time and each checks, under the lock, that its caller still owns the project: of two at once, the
 * second is refused with 403. The schema allows one owner per project
 * (`project_members_one_owner`), so the old owner is made a member before the new one is made
 * owner, in one transaction: no one ever sees zero or two owners. Naming the caller changes nothing.
 */
export async function transferOwnership(
  em: EntityManager,
  actor: User,
  project: Project,
  username: string,
  limits: Limits,
): Promise<ProjectView> {
  const heir = await em.findOne(User, { username: username.toLowerCase() });
  if (!heir) throw memberNotFound();
  return transaction(em, async (tx) => {
    for (const id of [actor.id, heir.id].sort()) {
      if (id === actor.id) await lockUser(tx, id);
      // The heir's account was deleted meanwhile: it is no member any more.
      else if (!(await lockUserRow(tx, id))) throw memberNotFound();
    }
    await lockProject(tx, project.id, 'update');
    const owner = await tx.findOne(ProjectMember, { project, user: actor, role: 'owner' });
    if (!owner) throw new Forbidden('not_owner', "Only the project's owner can do this.");
    if (heir.id === actor.id) return loadProject(tx, project.id);
    const next = await tx.findOne(ProjectMember, { project, user: heir });
    if (!next) throw memberNotFound();
    const owned = await tx.count(ProjectMember, { user: heir, role: 'owner' });
    refuseAtCap(limits, 'projectsPerUser', owned, `${heir.username} owns ${owned} projects`);
    await tx.nativeUpdate(ProjectMember, { id: owner.id }, { role: 'member' });
    await tx.nativeUpdate(ProjectMember, { id: next.id }, { role: 'owner' });
    recordActivity(tx, project, actor, 'project.owner_changed', { from: actor.username, to: heir.username });
    await tx.flush();
    return loadProject(tx, project.id);
  });
}
