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
import { mapRow, query, selectColumns } from './rows.js';
import { conflictOn } from './unique.js';

/** What a Project answer shows, loaded in a fixed number of queries whatever the project's size. */
export const PROJECT_VIEW = ['members.user', 'feeds'] as const;

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
): Promise<Project> {
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

/**
 * A project with everything its answer shows, in three statements whatever its size: the project,
 * its members joined with their users, its feeds. (One populate of both collections would join
 * members × feeds into one result of members·feeds rows, and MikroORM then re-reads the users.)
 * The project row comes from this request's identity map when `authorize` already read it; pass
 * `refresh` after changing it in a transaction of its own.
 */
export async function loadProject(em: EntityManager, id: string, options: { refresh?: boolean } = {}): Promise<Project> {
  const project = await em.findOneOrFail(Project, { id }, { refresh: options.refresh ?? false });
  await loadProjectView(em, [project]);
  return project;
}

/**
 * Fills PROJECT_VIEW for `projects`: members with their users by joining time (the presenter puts
 * the owner first), feeds by creation. Two hand-written statements (rows.ts) whatever the number of
 * projects, members and feeds.
 */
async function loadProjectView(em: EntityManager, projects: Project[]): Promise<void> {
  if (projects.length === 0) return;
  const ids = projects.map((p) => p.id);
  const memberRows = await query(
    em,
    `select ${selectColumns(em, ProjectMember, 'm', 'm')}, ${selectColumns(em, User, 'u', 'u')}
     from project_members m join users u on u.id = m.user_id
     where m.project_id in (?) order by m.created_at, m.id`,
    [ids],
  );
  const feedRows = await query(em, `select ${selectColumns(em, Feed, 'f', 'f')} from feeds f where f.project_id in (?) order by f.created_at, f.id`, [ids]);
  const members = memberRows.map((row) => {
    mapRow(em, User, row, 'u');
    return mapRow(em, ProjectMember, row, 'm');
  });
  const feeds = feedRows.map((row) => mapRow(em, Feed, row, 'f'));
  for (const project of projects) {
    project.members.hydrate(members.filter((m) => m.project.id === project.id));
    project.feeds.hydrate(feeds.filter((f) => f.project.id === project.id));
  }
}

export async function listProjects(em: EntityManager, user: User, page: PageRequest): Promise<Project[]> {
  // The page is chosen first (filtering on the caller's membership), then its members and feeds loaded.
  const rows = await findPage(em, Project, { members: { user } }, page);
  await loadProjectView(em, rows);
  return rows;
}

export interface ProjectChanges {
  name?: string | undefined;
  namespace?: string | undefined;
  /** A new icon as a data URL, or null to remove it. */
  icon?: string | null | undefined;
}

export async function updateProject(em: EntityManager, icons: IconStore, actor: User, project: Project, changes: ProjectChanges): Promise<Project> {
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
