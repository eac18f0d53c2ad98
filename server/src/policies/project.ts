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
 * - What an API token may do on top of that (the second part, below): its scopes against the
 *   operation's `x-scope` (`permitScope`, asked by http/auth.ts before any handler runs), and the
 *   projects it is limited to (`permitProject`, asked by domain/access.ts with the project loaded).
 */
import type { components } from '../../../spec/generated/openapi.js';
import { Forbidden, InsufficientScope, NotFound, projectNotFound } from '../errors.js';

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
  'webhook.list': 'member',
  'webhook.read': 'member',
  'webhook.create': 'member',
  'webhook.update': 'member',
  'webhook.delete': 'member',
  'webhook.test': 'member',
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

// ---------- What a credential reaches: an API token's scopes and projects ----------

/** What an API token may do; each operation an API token may call names the one it needs (`x-scope`, spec/scopes.tsp). */
export type TokenScope = components['schemas']['ApiTokenScope'];

/**
 * What a credential may do, and where. A session may do whatever its user may (`UNLIMITED`); an API
 * token what it was made for.
 */
export interface Grant {
  /** `['all']`, or some of the narrower scopes. */
  readonly scopes: readonly TokenScope[];
  /** The ids of the only projects it reaches; undefined: every project its user is a member of. */
  readonly projectIds: ReadonlySet<string> | undefined;
}

/** A session's grant, and that of an API token made with neither `projects` nor `scopes`. */
export const UNLIMITED: Grant = Object.freeze({ scopes: Object.freeze(['all'] as const), projectIds: undefined });

/**
 * Whether `grant` covers an operation that needs `needed`. `namesProject`: the operation acts on the
 * project its path names, whose reach `permitProject` decides once the project is loaded.
 *
 * - Scope `all` covers every operation, but a token limited to projects is refused the account's
 *   own `all` operations (the account, its received invites, creating a project): they reach
 *   beyond its projects.
 * - A narrower scope covers exactly the operations that name it: `read` does not come with a
 *   write scope, nor a write scope with `read`, and none covers an `all` operation.
 */
export function coversOperation(grant: Grant, needed: TokenScope, namesProject: boolean): boolean {
  if (grant.scopes.includes('all')) return needed !== 'all' || namesProject || grant.projectIds === undefined;
  return needed !== 'all' && grant.scopes.includes(needed);
}

/** `coversOperation`, or 403 `insufficient_scope` saying what was missing. */
export function permitScope(grant: Grant, needed: TokenScope, namesProject: boolean): void {
  if (coversOperation(grant, needed, namesProject)) return;
  if (grant.scopes.includes('all')) {
    throw new InsufficientScope('This operation reaches beyond projects: it needs an API token that is not limited to projects.');
  }
  throw new InsufficientScope(`This operation needs an API token with scope ${needed}; this one has ${grant.scopes.join(', ')}.`);
}

/** Whether `grant` reaches the project `projectId` (of which its user is a member: the rules above decide that). */
export function reachesProject(grant: Grant, projectId: string): boolean {
  return grant.projectIds === undefined || grant.projectIds.has(projectId);
}

/** 404 `not_found`, as to a non-member, when `grant` does not reach the project: the token learns nothing of it. */
export function permitProject(grant: Grant, projectId: string): void {
  if (!reachesProject(grant, projectId)) throw projectNotFound();
}

/** Whether an API token may be made with these scopes: `all` alone, or some of the narrower ones. */
export function isScopeSet(scopes: readonly TokenScope[]): boolean {
  return scopes.length > 0 && (!scopes.includes('all') || scopes.length === 1);
}
