/**
 * Deleting an account: the projects it owns alone go with it (each as a project's own delete goes,
 * subscription first), its places in other projects and its pending invites are given up with the
 * activity those changes always write (what it left in those projects ends with its place there,
 * departure.ts), and the user's row goes last, taking its sessions and API tokens with it by the
 * schema's cascades (activity it wrote keeps existing, its actor set to null).
 *
 * One transaction, in the lock order of transaction.ts: the user's row, then the projects it owns
 * (FOR UPDATE, in id order), then the other projects it touches (KEY SHARE, in id order). Whether an
 * owned project has other members is counted only once all of them are locked: a join (an accepted
 * invite locks the project first) either committed before, and the delete is refused with 409
 * `owns_projects`, or waits, and then finds no project (404). A transfer that would make the user an
 * owner locks the user's row first, so the set of owned projects cannot change meanwhile.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ProjectInvite, User } from '../db/entities.js';
import { lockProjectRow } from '../db/row-locks.js';
import { deleteUserRow } from '../db/repositories/accounts-rows.js';
import {
  deleteInviteById,
  deleteMembership,
  invitesReceivedBy,
  invitesSentBy,
  membershipsOf,
  ownedProjects,
  projectReference,
} from '../db/repositories/projects-rows.js';
import { lockUser, transaction, writeChanges } from '../db/transaction.js';
import { OwnsProjects } from '../errors.js';
import { recordActivity, type ActivityType } from './activity.js';
import { endWhatTheMemberLeft } from './departure.js';
import type { SubscriptionCanceller } from './billing.js';
import { deleteProjectIn } from './projects.js';

/** A row given up in another project, and the activity that records it there. */
interface GivenUp {
  projectId: string;
  /** Deletes the row: false when someone else removed it meanwhile. */
  remove: (tx: EntityManager) => Promise<boolean>;
  type: ActivityType;
  username: string;
}

/**
 * Deletes `user`'s account; 409 `owns_projects` while it owns a project with other members, 502
 * `billing_unavailable` when a subscription cannot be cancelled. Either refusal leaves everything
 * as it was (a subscription Stripe already cancelled for an earlier project stays cancelled: no
 * paying subscription outlives its project, and none is started again).
 */
export async function deleteAccount(em: EntityManager, billing: SubscriptionCanceller, user: User): Promise<void> {
  return transaction(em, async (tx) => {
    await lockUser(tx, user.id);
    // A project deleted meanwhile has no row to lock, and is not in the list read under the locks.
    for (const { id } of await ownedProjects(tx, user.id)) await lockProjectRow(tx, id, 'update');
    const owned = await ownedProjects(tx, user.id);
    const shared = owned.filter((project) => project.others > 0);
    if (shared.length > 0) throw new OwnsProjects(shared);
    for (const { id } of owned) await deleteProjectIn(tx, billing, id);

    const givenUp = await rowsGivenUp(tx, user);
    // As above: a row of a project deleted meanwhile went with it, and its removal below finds nothing.
    for (const projectId of [...new Set(givenUp.map((row) => row.projectId))].sort()) await lockProjectRow(tx, projectId, 'key share');
    for (const row of givenUp) {
      // A row someone else removed meanwhile was recorded by that removal.
      if (!(await row.remove(tx))) continue;
      const project = projectReference(tx, row.projectId);
      recordActivity(tx, { project, actor: user, type: row.type, data: { username: row.username } });
      if (row.type !== 'member.left') continue;
      // Memberships come first among the rows: the invites this revokes are then found gone below.
      await endWhatTheMemberLeft(tx, { project, user });
    }
    await writeChanges(tx);

    await deleteUserRow(tx, user.id);
  });
}

/** The account's places in projects it does not own, and its pending invites, received and sent. */
async function rowsGivenUp(tx: EntityManager, user: User): Promise<GivenUp[]> {
  const memberships = await membershipsOf(tx, user.id);
  const received = await invitesReceivedBy(tx, user.id);
  const sent = await invitesSentBy(tx, user.id);
  const inviteRow = (invite: ProjectInvite, type: ActivityType, username: string): GivenUp => ({
    projectId: invite.project.id,
    remove: (t) => deleteInviteById(t, invite.id),
    type,
    username,
  });
  return [
    ...memberships.map((member): GivenUp => ({
      projectId: member.project.id,
      remove: (t) => deleteMembership(t, member.id),
      type: 'member.left',
      username: user.username,
    })),
    ...received.map((invite) => inviteRow(invite, 'invite.declined', user.username)),
    ...sent.map((invite) => inviteRow(invite, 'invite.revoked', invite.user.username)),
  ];
}
