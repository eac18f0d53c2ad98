/**
 * Who may do what on a project: the one table of rules every project route goes through, decided
 * on plain facts (the caller's role, whether the route names the caller, whether the caller has a
 * pending invite), so that the rules read, and can be checked, apart from how the facts are loaded
 * (domain/access.ts loads them).
 *
 * - A project the caller is not a member of does not exist for it: 404, whatever the action, so a
 *   non-member never learns that a namespace is in use by probing routes.
 * - A member asking for an owner's action gets 403 `not_owner`.
 * - A pending invitee is not a member: it reaches only its own invite (accept, decline).
 * - Which credential kind a route takes (session token or API token too) is not decided here but
 *   by the contract's `x-session-only`, enforced for every route in http/auth.ts before this runs.
 */
import { Forbidden, NotFound, projectNotFound } from '../errors.js';

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
  'event.count': 'member',
  'end-user.identify': 'member',
  'end-user.read': 'member',
  'billing.checkout': 'owner',
  'billing.portal': 'owner',
  'project.transfer': 'owner',
} as const satisfies Record<string, Rule>;

export type ProjectAction = keyof typeof PROJECT_RULES;

/** The actions only the invitee the route names may take: they succeed only with its pending invite. */
export type InviteeAction = { [A in ProjectAction]: (typeof PROJECT_RULES)[A] extends 'invitee' ? A : never }[ProjectAction];

/** A member's role in a project (the `project_members.role` column's values). */
export type ProjectRole = 'owner' | 'member';

/** What `permit` lets the caller act as: its role, or the invitee acting on its own invite. */
export type ActingAs = ProjectRole | 'invitee';

export interface AccessFacts {
  /** The caller's role in the project; undefined when it is not a member. */
  role: ProjectRole | undefined;
  /** The route names the caller (its own membership or invite). */
  isSubject: boolean;
  /** The caller has a pending invite to the project; only asked for when `needsInviteFact` says so. */
  hasPendingInvite: boolean;
}

const invitesMatter = (rule: Rule): boolean => rule === 'invitee' || rule === 'owner-or-invitee';

/**
 * Whether `permit` needs to know if the caller has a pending invite: only on an invite route that
 * names the caller itself, so every other route is decided without looking for one.
 */
export function needsInviteFact(action: ProjectAction, isSubject: boolean): boolean {
  return isSubject && invitesMatter(PROJECT_RULES[action]);
}

/** What the caller may act as to take `action`; throws 404 `not_found` or 403 `not_owner`/`forbidden` otherwise. */
export function permit(action: ProjectAction, { role, isSubject, hasPendingInvite }: AccessFacts): ActingAs {
  const rule: Rule = PROJECT_RULES[action];

  if (invitesMatter(rule)) {
    if (isSubject && hasPendingInvite) return 'invitee';
    if (!role) throw projectNotFound();
    if (isSubject) throw new NotFound('You have no pending invite to this project.');
    if (rule === 'invitee') throw new Forbidden('forbidden', 'Only the invited user can accept an invite.');
    if (role !== 'owner') throw new Forbidden('not_owner', "Only the project's owner can revoke another user's invite.");
    return role;
  }

  if (!role) throw projectNotFound();
  if (rule === 'owner' && role !== 'owner') throw new Forbidden('not_owner', "Only the project's owner can do this.");
  if (rule === 'owner-or-self' && role !== 'owner' && !isSubject) {
    throw new Forbidden('not_owner', "Only the project's owner can remove another member.");
  }
  return role;
}
