/**
 * Projects: create (with its first feed and its owner), list, rename, re-icon, delete. Each change
 * and its activity record share one transaction; the database's unique constraint settles a race
 * for a namespace.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Feed, Project, ProjectMember, type User } from '../db/entities.js';
import type { IconStore } from '../storage/icons.js';
import { recordActivity } from './activity.js';
import { decodeCursor, type PageRequest } from './pagination.js';
import { conflictOn } from './unique.js';

/** What a Project answer shows, loaded in a fixed number of queries whatever the project's size. */
export const PROJECT_VIEW = ['members.user', 'feeds'] as const;

const NAMESPACE_TAKEN = {
  projects_namespace_unique: ['namespace_taken', 'Another project already uses this namespace.'],
} as const satisfies Parameters<typeof conflictOn>[1];

/** Cancels a project's subscription before it is deleted; the billing adapter implements it. */
export interface SubscriptionCanceller {
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

/** A project with everything its answer shows. */
export async function loadProject(em: EntityManager, id: string): Promise<Project> {
  return em.findOneOrFail(Project, { id }, { populate: PROJECT_VIEW, orderBy: { members: { createdAt: 'asc' }, feeds: { createdAt: 'asc' } }, refresh: true });
}

export async function listProjects(em: EntityManager, user: User, page: PageRequest): Promise<Project[]> {
  const below = decodeCursor(page.cursor);
  const rows = await em.find(
    Project,
    { members: { user }, ...(below ? { id: { $lt: below } } : {}) },
    { orderBy: { id: 'desc' }, limit: page.limit + 1, fields: ['id'] },
  );
  if (rows.length === 0) return [];
  const projects = await em.find(
    Project,
    { id: { $in: rows.map((r) => r.id) } },
    { populate: PROJECT_VIEW, orderBy: { id: 'desc', members: { createdAt: 'asc' }, feeds: { createdAt: 'asc' } }, refresh: true },
  );
  return projects;
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
  return loadProject(em, project.id);
}

/**
 * Deletes a project and, by the schema's cascades, everything attached to it, in one statement.
 * A subscription is cancelled first: if that fails, nothing is deleted. Of two concurrent deletes,
 * the second finds no row and answers 404.
 */
export async function deleteProject(em: EntityManager, billing: SubscriptionCanceller, project: Project): Promise<boolean> {
  if (project.billingId) await billing.cancelSubscription(project.billingId);
  return (await em.nativeDelete(Project, { id: project.id })) > 0;
}
