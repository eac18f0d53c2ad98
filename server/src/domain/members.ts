/**
 * Membership: invites, accepting them, and leaving or being removed. A change only the owner may
 * make decides again, under the project's row lock, that the caller still owns the project
 * (access.ts `confirmAccess`): a transfer holds that lock until it commits.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Project, ProjectInvite, User } from '../db/entities.js';
import type { PageRequest } from '../db/page.js';
import { findUserByUsername } from '../db/repositories/accounts-rows.js';
import {
  addInvite,
  addMembership,
  countMembersAndInvites,
  countOwnedProjects,
  deleteInviteById,
  deleteInviteOf,
  deleteMembership,
  findMembership,
  findMembershipByUsername,
  hasPendingInvite,
  isMember,
  projectInvitePage,
  receivedInvitePage,
  setMemberRole,
} from '../db/repositories/projects-rows.js';
import { lockUserRow } from '../db/row-locks.js';
import { lockProject, lockUser, transaction, writeChanges } from '../db/transaction.js';
import { Conflict, Forbidden, NotFound } from '../errors.js';
import { confirmAccess } from './access.js';
import { queueChange } from '../db/repositories/webhook-outbox.js';
import { recordActivity } from './activity.js';
import { endWhatTheMemberLeft } from './departure.js';
import type { ChangeShapes } from './change-shapes.js';
import { refuseAtCap, type Limits } from './limits.js';
import type { Scope } from './scope.js';
import type { ProjectView } from './project-view.js';
import { loadProject } from './projects.js';

async function userNamed(em: EntityManager, username: string): Promise<User> {
  const user = await findUserByUsername(em, username.toLowerCase());
  if (!user) throw new NotFound('No user with this username.');
  return user;
}

const memberNotFound = () => new NotFound('No member with this username.');

/** Whether `username` names `user` itself (usernames are stored lower-case, and compared without regard to case). */
const names = (username: string, user: User) => username.toLowerCase() === user.username;

/** What the members module is built with (services.ts). */
export interface MembersDeps {
  limits: Limits;
  shapes: ChangeShapes;
}

/** A project's members and invites: invite, accept, revoke or decline, leave or remove, hand over. */
export class Members {
  constructor(private readonly deps: MembersDeps) {}

  /**
   * The owner removes a member, or a member removes itself (leaves). The owner stays. What the
   * member left behind there ends with it, in the same transaction (departure.ts), and its event
   * streams once that commits. Of concurrent removals of one member, only the one whose statement
   * removed the row answers 204 and records it. Removing another member is the owner's: 403
   * `not_owner` once the caller no longer owns the project.
   */
  async remove({ em, caller }: Scope, project: Project, username: string): Promise<void> {
    const actor = caller.user;
    await transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'key share');
      const leaving = names(username, actor);
      if (!leaving) await confirmAccess(tx, project.id, actor, 'member.remove');
      const target = await findMembershipByUsername(tx, project.id, username.toLowerCase());
      if (!target) throw memberNotFound();
      if (target.role === 'owner') throw new Conflict('owner_cannot_leave', 'The owner cannot leave or be removed from its project.');
      if (!(await deleteMembership(tx, target.id))) throw memberNotFound();
      // First: the departing member's own endpoints are not sent its `member.left`.
      await endWhatTheMemberLeft(tx, { project, user: target.user });
      recordActivity(tx, { project, actor, type: leaving ? 'member.left' : 'member.removed', data: { username: target.user.username } });
      await queueChange(tx, project.id, 'member.left', this.deps.shapes.member(target.user, target.role));
      await writeChanges(tx);
    });
  }

  /**
   * The owner invites a user; 409 `already_member`, `already_invited`, or `limit_reached` when the
   * project's members and pending invites together are as many as it may have (accepting an invite
   * turns one into the other, so the cap is counted here). Invites of a project are created one at a
   * time (the project row FOR NO KEY UPDATE), so these checks and the insert are one step; 403
   * `not_owner` once the caller no longer owns the project.
   */
  async invite({ em, caller }: Scope, project: Project, username: string): Promise<ProjectInvite> {
    const actor = caller.user;
    const invitee = await userNamed(em, username);
    return transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      await confirmAccess(tx, project.id, actor, 'invite.create');
      if (await isMember(tx, project.id, invitee.id)) {
        throw new Conflict('already_member', 'This user is already a member of the project.');
      }
      if (await hasPendingInvite(tx, project.id, invitee.id)) {
        throw new Conflict('already_invited', 'This user already has a pending invite to the project.');
      }
      const n = await countMembersAndInvites(tx, project.id);
      refuseAtCap(this.deps.limits, 'membersPerProject', n, `This project has ${n} members and pending invites`);
      const invite = addInvite(tx, project, invitee, actor);
      recordActivity(tx, { project, actor, type: 'invite.created', data: { username: invitee.username } });
      await writeChanges(tx);
      return invite;
    });
  }

  /** The project's pending invites, newest first. */
  invitesOf({ em }: Scope, project: Project, page: PageRequest): Promise<ProjectInvite[]> {
    return projectInvitePage(em, project.id, page);
  }

  /** The caller's pending invites, newest first. */
  received({ em, caller }: Scope, page: PageRequest): Promise<ProjectInvite[]> {
    return receivedInvitePage(em, caller.userId, page);
  }

  /**
   * The invitee accepts: the invite becomes a membership in one transaction, which answers the
   * project as it then is (still locked: a concurrent delete waits for it, or it for the delete and
   * then finds no project: 404). The invite row is deleted first, so of two concurrent accepts only
   * one finds it. The invitee's row is locked before the project's, as an account's delete locks it:
   * a membership is either there when the invitee's account is deleted, and given up with a record,
   * or never made (the account, and the credential of this request, are gone: 401).
   */
  async join({ em, caller }: Scope, invite: ProjectInvite): Promise<ProjectView> {
    const invitee = caller.user;
    return transaction(em, async (tx) => {
      await lockUser(tx, invitee.id);
      await lockProject(tx, invite.project.id, 'key share');
      if (!(await deleteInviteById(tx, invite.id))) throw new NotFound('You have no pending invite to this project.');
      addMembership(tx, invite.project, invitee, 'member');
      recordActivity(tx, { project: invite.project, actor: invitee, type: 'member.joined', data: { username: invitee.username } });
      await queueChange(tx, invite.project.id, 'member.joined', this.deps.shapes.member(invitee, 'member'));
      await writeChanges(tx);
      return loadProject(tx, invite.project.id);
    });
  }

  /**
   * The owner revokes an invite, or the invitee declines its own. Revoking is the owner's: 403
   * `not_owner` once the caller no longer owns the project.
   */
  async withdraw({ em, caller }: Scope, project: Project, username: string): Promise<void> {
    const actor = caller.user;
    await transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'key share');
      const declined = names(username, actor);
      if (!declined) await confirmAccess(tx, project.id, actor, 'invite.delete');
      // Only an unknown username is "no invite": any other failure (a timeout) is not a 404.
      const invitee = await findUserByUsername(tx, username.toLowerCase());
      if (!invitee || !(await deleteInviteOf(tx, project.id, invitee.id))) throw new NotFound('No pending invite for this user.');
      recordActivity(tx, { project, actor, type: declined ? 'invite.declined' : 'invite.revoked', data: { username: invitee.username } });
      await writeChanges(tx);
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
  async handOver({ em, caller }: Scope, project: Project, username: string): Promise<ProjectView> {
    const actor = caller.user;
    const heir = await findUserByUsername(em, username.toLowerCase());
    if (!heir) throw memberNotFound();
    return transaction(em, async (tx) => {
      for (const id of [actor.id, heir.id].sort()) {
        if (id === actor.id) await lockUser(tx, id);
        // The heir's account was deleted meanwhile: it is no member any more.
        else if (!(await lockUserRow(tx, id))) throw memberNotFound();
      }
      await lockProject(tx, project.id, 'update');
      const owner = await findMembership(tx, project.id, actor.id, 'owner');
      if (!owner) throw new Forbidden('not_owner', "Only the project's owner can do this.");
      if (heir.id === actor.id) return loadProject(tx, project.id);
      const next = await findMembership(tx, project.id, heir.id);
      if (!next) throw memberNotFound();
      const owned = await countOwnedProjects(tx, heir.id);
      refuseAtCap(this.deps.limits, 'projectsPerUser', owned, `${heir.username} owns ${owned} projects`);
      await setMemberRole(tx, owner.id, 'member');
      await setMemberRole(tx, next.id, 'owner');
      recordActivity(tx, { project, actor, type: 'project.owner_changed', data: { from: actor.username, to: heir.username } });
      await writeChanges(tx);
      return loadProject(tx, project.id);
    });
  }
}
