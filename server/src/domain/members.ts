/** Membership: invites, accepting them, and leaving or being removed. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ProjectInvite, ProjectMember, User, type Project } from '../db/entities.js';
import { Conflict, NotFound } from '../errors.js';
import { recordActivity } from './activity.js';
import { findPage, type PageRequest } from './pagination.js';
import { conflictOn } from './unique.js';

async function userNamed(em: EntityManager, username: string): Promise<User> {
  const user = await em.findOne(User, { username: username.toLowerCase() });
  if (!user) throw new NotFound('No user with this username.');
  return user;
}

/** The owner removes a member, or a member removes itself (leaves). The owner stays. Returns the removed user's id. */
export async function removeMember(em: EntityManager, actor: User, project: Project, username: string): Promise<string> {
  return em.transactional(async (tx) => {
    const target = await tx.findOne(ProjectMember, { project, user: { username: username.toLowerCase() } }, { populate: ['user'] });
    if (!target) throw new NotFound('No member with this username.');
    if (target.role === 'owner') throw new Conflict('owner_cannot_leave', "The owner cannot leave or be removed from its project.");
    const leaving = target.user.id === actor.id;
    recordActivity(tx, project, actor, leaving ? 'member.left' : 'member.removed', { username: target.user.username });
    tx.remove(target);
    await tx.flush();
    return target.user.id;
  });
}

export async function createInvite(em: EntityManager, actor: User, project: Project, username: string): Promise<ProjectInvite> {
  const invitee = await userNamed(em, username);
  if (await em.count(ProjectMember, { project, user: invitee })) {
    throw new Conflict('already_member', 'This user is already a member of the project.');
  }
  const create = () =>
    em.transactional(async (tx) => {
      const invite = tx.create(ProjectInvite, { project, user: invitee, invitedBy: actor });
      recordActivity(tx, project, actor, 'invite.created', { username: invitee.username });
      await tx.flush();
      return invite;
    });
  return conflictOn(create, {
    project_invites_project_user_unique: ['already_invited', 'This user already has a pending invite to the project.'],
  });
}

export async function listInvites(em: EntityManager, project: Project, page: PageRequest): Promise<ProjectInvite[]> {
  return findPage(em, ProjectInvite, { project }, page, { populate: ['user', 'invitedBy'] });
}

export async function listReceivedInvites(em: EntityManager, user: User, page: PageRequest): Promise<ProjectInvite[]> {
  return findPage(em, ProjectInvite, { user }, page, { populate: ['project', 'invitedBy'] });
}

/**
 * The invitee accepts: the invite becomes a membership in one transaction. The invite row is
 * deleted first, so of two concurrent accepts only one finds it.
 */
export async function acceptInvite(em: EntityManager, invitee: User, invite: ProjectInvite): Promise<void> {
  await em.transactional(async (tx) => {
    if ((await tx.nativeDelete(ProjectInvite, { id: invite.id })) === 0) throw new NotFound('You have no pending invite to this project.');
    tx.create(ProjectMember, { project: invite.project, user: invitee, role: 'member' });
    recordActivity(tx, invite.project, invitee, 'member.joined', { username: invitee.username });
    await tx.flush();
  });
}

/** The owner revokes an invite, or the invitee declines its own. */
export async function deleteInvite(em: EntityManager, actor: User, project: Project, username: string): Promise<void> {
  await em.transactional(async (tx) => {
    const invitee = await userNamed(tx, username).catch(() => undefined);
    const deleted = invitee ? await tx.nativeDelete(ProjectInvite, { project, user: invitee }) : 0;
    if (deleted === 0) throw new NotFound('No pending invite for this user.');
    const declined = invitee!.id === actor.id;
    recordActivity(tx, project, actor, declined ? 'invite.declined' : 'invite.revoked', { username: invitee!.username });
    await tx.flush();
  });
}
