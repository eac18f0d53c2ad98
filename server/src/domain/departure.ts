/**
 * What a member's departure ends (docs/security.md, "What a member's departure ends"): whatever the
 * member left in the project that would otherwise go on acting for it once it is no member. Run in
 * the departure's own transaction (a member leaving or removed, members.ts; an account deleted,
 * account-deletion.ts), after its membership row is deleted and with the project's row locked, so
 * the departure and all it ends commit together or not at all.
 *
 * - Webhook endpoints that answer to it (it made them, or last chose where they send) are turned
 *   off, `creator_left`, each with its `webhook.disabled` entry; their waiting deliveries stay
 *   unsent until a member turns the endpoint on again, and so becomes the one it answers to.
 * - Pending invites it sent (as the owner it was before a hand-over) are revoked, with their
 *   `invite.revoked` entries (by no actor: the service revokes them).
 * - The answers recorded for its `Idempotency-Key`s in the project are forgotten, so none is
 *   replayed to it: a request of a non-member is 404.
 *
 * What stays: what it made as the project's data (events, insights, feeds, activity), which the
 * project keeps. Its credentials need nothing here: every request checks membership afresh, and
 * its open event streams on every instance end once this commits (`member-removed`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { afterCommit } from '../db/commit-notices.js';
import type { Project, User } from '../db/entities.js';
import { forgetKeysIn } from '../db/repositories/idempotency-rows.js';
import { deleteInviteById, invitesSentIn } from '../db/repositories/projects-rows.js';
import { disableEndpointsOf } from '../db/repositories/webhook-outbox.js';
import { recordActivity } from './activity.js';

/** Ends, in `tx`, what `user` leaves behind in `project` as its membership there ends. */
export async function endWhatTheMemberLeft(
  tx: EntityManager,
  { project, user }: { project: Project; user: Pick<User, 'id'> },
): Promise<void> {
  const departure = { projectId: project.id, userId: user.id };
  await disableEndpointsOf(tx, departure);
  await revokeInvitesSent(tx, project, user);
  await forgetKeysIn(tx, departure);
  afterCommit(tx, { kind: 'member-removed', ...departure });
}

async function revokeInvitesSent(tx: EntityManager, project: Project, user: Pick<User, 'id'>): Promise<void> {
  for (const invite of await invitesSentIn(tx, project.id, user.id)) {
    // One revoked meanwhile was recorded by that revocation.
    if (await deleteInviteById(tx, invite.id))
      recordActivity(tx, { project, actor: null, type: 'invite.revoked', data: { username: invite.user.username } });
  }
}
