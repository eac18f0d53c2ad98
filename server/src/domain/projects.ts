/**
 * Projects: create (with its first feed and its owner), list, rename, re-icon, delete. Each change
 * and its activity record share one transaction; the database's unique constraint settles a race
 * for a namespace.
 */
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, Project, ProjectMember, User } from '../db/entities.js';
import type { IconStore } from '../storage/icons.js';
import { recordActivity } from './activity.js';
import type { WebhookVerifier } from './billing.js';
import { findPage, type PageRequest } from './pagination.js';
import { query } from '../db/sql.js';
import { conflictOn } from './unique.js';

/** A member as a project's answer shows it. */
export interface MemberRow {
  id: string;
  username: string;
  icon: string | null;
  role: ProjectMember['role'];
}

/** A feed as a project's answer shows it. */
export type FeedRow = Pick<Feed, 'id' | 'name' | 'description' | 'emoji' | 'type'>;

/**
 * A project with what its answer shows. Members and feeds are plain rows, not managed entities: an
 * answer never changes them, and mapping a project's 45 of them into the identity map cost more CPU
 * than running the statements (BENCHMARKS.md). `id` is the project's, for pagination.
 */
export interface ProjectView extends ProjectContents {
  id: string;
  project: ProjectFields;
}

/** A project's own fields an answer shows: a managed entity, or a plain row (policies/project.ts). */
export type ProjectFields = Pick<Project, 'id' | 'namespace' | 'name' | 'icon' | 'tier' | 'billingId' | 'createdAt'>;

export interface ProjectContents {
  members: MemberRow[];
  feeds: FeedRow[];
}

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

export async function createProject(
  em: EntityManager,
  icons: IconStore,
  owner: User,
  input: { name: string; namespace: string; icon?: string | undefined },
): Promise<ProjectView> {
  // A refused icon is refused before anything is written.
  const icon = input.icon === undefined ? undefined : icons.parse(input.icon, 'create', '/body/icon');
  const name = input.name.trim();
  const create = () =>
    em.transactional(async (tx) => {
      const project = tx.create(Project, { namespace: input.namespace, name, icon: icon?.sha256 ?? null, tier: 0, billingId: null });
      tx.create(ProjectMember, { project, user: owner, role: 'owner' });
      tx.create(Feed, { project, name: 'general', description: null, emoji: null, type: 0 });
      recordActivity(tx, project, owner, 'project.created', { namespace: project.namespace, name });
      await tx.flush();
      // After the flush (which refuses a taken namespace), before the commit: a refused project leaves no file.
      if (icon) await icons.save(icon);
      return project.id;
    });
  return loadProject(em, await conflictOn(create, NAMESPACE_TAKEN));
}

/** A project by id, with what its answer shows; pass `refresh` after changing it in a transaction of its own. */
export async function loadProject(em: EntityManager, id: string, options: { refresh?: boolean } = {}): Promise<ProjectView> {
  const [view] = await viewProjects(em, [await em.findOneOrFail(Project, { id }, { refresh: options.refresh ?? false })]);
  return view!;
}

/**
 * The members (with their users, by joining time; the presenter puts the owner first) and feeds (by
 * creation) of the project aliased `p`, as two columns, `members` and `feeds`: PostgreSQL aggregates
 * the rows into JSON arrays, so a project's contents come in its own row whatever their size.
 */
export const PROJECT_CONTENTS = `
  coalesce((select json_agg(json_build_object('id', u.id, 'username', u.username, 'icon', u.icon, 'role', m.role) order by m.created_at, m.id)
            from project_members m join users u on u.id = m.user_id where m.project_id = p.id), '[]') as members,
  coalesce((select json_agg(json_build_object('id', f.id, 'name', f.name, 'description', f.description, 'emoji', f.emoji, 'type', f.type) order by f.created_at, f.id)
            from feeds f where f.project_id = p.id), '[]') as feeds`;

/** What `projects` answers show, in one statement whatever the number of projects, members and feeds. */
export async function viewProjects(em: EntityManager, projects: Project[]): Promise<ProjectView[]> {
  if (projects.length === 0) return [];
  const rows = await query<{ id: string } & ProjectContents>(em, `select p.id, ${PROJECT_CONTENTS} from unnest(?::uuid[]) as p(id)`, [
    projects.map((project) => project.id),
  ]);
  const contents = new Map(rows.map((row) => [row.id, row]));
  return projects.map((project) => {
    const { members, feeds } = contents.get(project.id)!;
    return { id: project.id, project, members, feeds };
  });
}

export async function listProjects(em: EntityManager, user: User, page: PageRequest): Promise<ProjectView[]> {
  // The page is chosen first (filtering on the caller's membership), then its members and feeds loaded.
  return viewProjects(em, await findPage(em, Project, { members: { user } }, page));
}

export interface ProjectChanges {
  name?: string | undefined;
  namespace?: string | undefined;
  /** A new icon as a data URL, or null to remove it. */
  icon?: string | null | undefined;
}

export async function updateProject(em: EntityManager, icons: IconStore, actor: User, project: Project, changes: ProjectChanges): Promise<ProjectView> {
  const icon = typeof changes.icon === 'string' ? icons.parse(changes.icon, 'update', '/body/icon') : undefined;
  const update = () =>
    em.transactional(async (tx) => {
      const current = await tx.findOneOrFail(Project, { id: project.id });
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
      if (icon) await icons.save(icon);
    });
  await conflictOn(update, NAMESPACE_TAKEN);
  return loadProject(em, project.id, { refresh: true });
}

/**
 * Deletes a project and, by the schema's cascades, everything attached to it, in one statement.
 * A subscription is cancelled first: if that fails, nothing is deleted. The project row is locked
 * (`select … for update`) from before the cancel until the delete commits, so of two concurrent
 * deletes only one ever calls Stripe; the other then finds no row and answers 404. The Stripe call
 * is bounded by the adapter's deadline, so the lock is never held longer than that. Everything in
 * the transaction goes through `tx`: in embedded mode the pool has one connection, which it holds.
 */
export async function deleteProject(em: EntityManager, billing: SubscriptionCanceller, project: Project): Promise<boolean> {
  return em.transactional(async (tx) => {
    const current = await tx.findOne(Project, { id: project.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    if (!current) return false;
    if (current.billingId) await billing.cancelSubscription(current.billingId);
    return (await tx.nativeDelete(Project, { id: current.id })) > 0;
  });
}
