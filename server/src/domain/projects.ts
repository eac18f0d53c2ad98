/**
 * Projects: create (with its first feed and its owner), list, rename, re-icon, delete. Each change
 * and its activity record share one transaction; the database's unique constraint settles a race
 * for a namespace.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, Project, ProjectMember, User } from '../db/entities.js';
import type { ProjectContents } from '../db/queries/project-contents.js';
import { contentsWithin } from '../db/queries/projects.js';
import type { IconStore } from '../storage/icons.js';
import { recordActivity } from './activity.js';
import type { WebhookVerifier } from './billing.js';
import { refuseAtCap, type Limits } from './limits.js';
import { findPage, type PageRequest } from '../db/page.js';
import { PAGE_BYTES } from './pagination.js';
import { lockProject, lockUser, transaction } from '../db/transaction.js';
import { conflictOn } from '../db/unique.js';

export type { FeedRow, MemberRow } from '../db/queries/project-contents.js';

/**
 * A project with what its answer shows. Members and feeds are plain rows, not managed entities: an
 * answer never changes them, and mapping a project's 45 of them into the identity map costs more CPU
 * than running the statements (docs/performance-journal.md has the figures). `id` is the project's, for pagination.
 */
export interface ProjectView extends ProjectContents {
  id: string;
  project: ProjectFields;
}

/** A project's own fields an answer shows: a managed entity, or a plain row (domain/access.ts). */
export type ProjectFields = Pick<Project, 'id' | 'namespace' | 'name' | 'icon' | 'tier' | 'billingId' | 'createdAt'>;

const NAMESPACE_TAKEN = {
  projects_namespace_unique: ['namespace_taken', 'Another project already uses this namespace.'],
} as const satisfies Parameters<typeof conflictOn>[1];

/**
 * The billing adapter (billing/index.ts): cancels a project's subscription before the project is
 * deleted, and verifies Stripe's webhook deliveries.
 */
export interface SubscriptionCanceller extends WebhookVerifier {
  /**
   * Resolves once Stripe has cancelled the subscription or says it no longer exists. Throws 502
   * `billing_unavailable` when that cannot be confirmed in bounded time (Stripe unreachable, timing
   * out or failing), or when billing is not configured.
   */
  cancelSubscription(billingId: string): Promise<void>;
}

/**
 * Creates a project owned by `owner`, with its first feed; 409 `limit_reached` when the owner owns
 * as many projects as a user may. The owner's row is locked while its projects are counted, so
 * concurrent creates of one user pass the cap one at a time.
 */
export async function createProject(
  em: EntityManager,
  icons: IconStore,
  owner: User,
  input: { name: string; namespace: string; icon?: string | undefined },
  limits: Limits,
): Promise<ProjectView> {
  // A refused icon is refused before anything is written.
  const icon = input.icon === undefined ? undefined : await icons.parse(input.icon, 'create', '/body/icon', owner.id);
  const name = input.name.trim();
  const create = () =>
    transaction(em, async (tx) => {
      await lockUser(tx, owner.id);
      const owned = await tx.count(ProjectMember, { user: owner, role: 'owner' });
      refuseAtCap(limits, 'projectsPerUser', owned, `You own ${owned} projects`);
      const project = tx.create(Project, { namespace: input.namespace, name, icon: icon?.sha256 ?? null, tier: 0, billingId: null });
      tx.create(ProjectMember, { project, user: owner, role: 'owner' });
      tx.create(Feed, { project, name: 'general', description: null, emoji: null, type: 0 });
      recordActivity(tx, project, owner, 'project.created', { namespace: project.namespace, name });
      await tx.flush();
      // After the flush (which refuses a taken namespace), before the commit: a refused project stores no icon.
      if (icon) await icons.save(tx, icon);
      return loadProject(tx, project.id);
    });
  return conflictOn(create, NAMESPACE_TAKEN);
}

/** A project by id, with what its answer shows. */
export async function loadProject(em: EntityManager, id: string): Promise<ProjectView> {
  const [view] = await viewProjects(em, [await em.findOneOrFail(Project, { id })]);
  return view!;
}

/**
 * What `projects` answers show, in one statement whatever the number of projects, members and
 * feeds. The contents of the projects in order fill at most `PAGE_BYTES` (measured as PostgreSQL
 * writes them, close to their answer's size): the first project always comes, and those after the
 * one that would pass the budget are left out, so a page of big projects is never loaded in full
 * only to be cut by `toPage`. Answers the projects that fit, in order.
 */
export async function viewProjects(em: EntityManager, projects: Project[]): Promise<ProjectView[]> {
  if (projects.length === 0) return [];
  const rows = await contentsWithin(
    em,
    projects.map((project) => project.id),
    PAGE_BYTES,
  );
  const contents = new Map(rows.map((row) => [row.id, row]));
  return projects.flatMap((project) => {
    const { members, feeds } = contents.get(project.id) ?? {};
    return members && feeds ? [{ id: project.id, project, members, feeds }] : [];
  });
}

/** A page of the caller's projects; `more` when projects beyond those answered remain. */
export async function listProjects(em: EntityManager, user: User, page: PageRequest): Promise<{ views: ProjectView[]; more: boolean }> {
  // The page is chosen first (filtering on the caller's membership), then its members and feeds loaded.
  const projects = await findPage(em, Project, { members: { user } }, page);
  const wanted = projects.slice(0, page.limit);
  const views = await viewProjects(em, wanted);
  return { views, more: projects.length > page.limit || views.length < wanted.length };
}

export interface ProjectChanges {
  name?: string | undefined;
  namespace?: string | undefined;
  /** A new icon as a data URL, or null to remove it. */
  icon?: string | null | undefined;
}

export async function updateProject(
  em: EntityManager,
  icons: IconStore,
  actor: User,
  project: Project,
  changes: ProjectChanges,
): Promise<ProjectView> {
  const icon = typeof changes.icon === 'string' ? await icons.parse(changes.icon, 'update', '/body/icon', actor.id) : undefined;
  const update = () =>
    transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'update');
      const current = await tx.findOneOrFail(Project, { id: project.id }, { refresh: true });
      const changed: Record<string, unknown> = {};
      const name = changes.name?.trim();
      if (name !== undefined && name !== current.name) {
        changed.name = { from: current.name, to: name };
        current.name = name;
      }
      if (changes.namespace !== undefined && changes.namespace !== current.namespace) {
        changed.namespace = { from: current.namespace, to: changes.namespace };
        current.namespace = changes.namespace;
      }
      const nextIcon = changes.icon === undefined ? current.icon : (icon?.sha256 ?? null);
      if (nextIcon !== current.icon) {
        changed.icon = nextIcon === null ? 'removed' : 'changed';
        current.icon = nextIcon;
      }
      if (Object.keys(changed).length > 0) recordActivity(tx, current, actor, 'project.updated', { changes: changed });
      await tx.flush();
      if (icon) await icons.save(tx, icon);
      return loadProject(tx, project.id);
    });
  return conflictOn(update, NAMESPACE_TAKEN);
}

/**
 * Deletes a project and, by the schema's cascades, everything attached to it, in one statement.
 * A subscription is cancelled first: if that fails, nothing is deleted. The project row is locked
 * FOR UPDATE from before the cancel until the delete commits, so of two concurrent deletes only one
 * ever calls Stripe; the other then finds no row and answers 404. Every writer of the project
 * locks its row before its children (transaction.ts), so the delete's cascade never waits for a
 * child a writer holds while that writer waits for the project. The Stripe call is bounded by the
 * adapter's deadline, so the lock is never held longer than that. Everything in the transaction
 * goes through `tx`: in embedded mode the pool has one connection, which it holds.
 */
export async function deleteProject(em: EntityManager, billing: SubscriptionCanceller, project: Project): Promise<void> {
  await transaction(em, (tx) => deleteProjectIn(tx, billing, project.id));
}

/**
 * The delete of one project inside the caller's transaction `tx` (a project's own delete, or an
 * account's delete of the projects it owns alone): lock, cancel, delete, as `deleteProject` says.
 * A failed cancel throws, and the caller's whole transaction rolls back.
 */
export async function deleteProjectIn(tx: EntityManager, billing: SubscriptionCanceller, projectId: string): Promise<void> {
  await lockProject(tx, projectId, 'update');
  const { billingId } = await tx.findOneOrFail(Project, { id: projectId }, { refresh: true });
  if (billingId) await billing.cancelSubscription(billingId);
  await tx.nativeDelete(Project, { id: projectId });
}
