/**
 * Projects: create (with its first feed and its owner), list, rename, re-icon, delete. Each change
 * and its activity record share one transaction; the database's unique constraint settles a race
 * for a namespace. A change only the owner may make decides again, under the project's row lock,
 * that the caller still owns the project (access.ts `confirmAccess`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../../spec/generated/openapi.js';
import type { Project } from '../db/entities.js';
import type { PageRequest } from '../db/page.js';
import {
  addProject,
  countOwnedProjects,
  deleteProjectRow,
  getProject,
  getProjectAfresh,
  memberProjectsPage,
  projectContentsWithin,
} from '../db/repositories/projects-rows.js';
import { lockProject, lockUser, transaction, writeChanges } from '../db/transaction.js';
import { conflictOn } from '../db/unique.js';
import type { IconStore } from '../storage/icons.js';
import { confirmAccess } from './access.js';
import { queueChange } from '../db/repositories/webhook-outbox.js';
import { recordActivity } from './activity.js';
import type { ChangeShapes } from './change-shapes.js';
import type { ProjectView } from './project-view.js';
import type { SubscriptionCanceller } from './billing.js';
import { refuseAtCap, type Limits } from './limits.js';
import { PAGE_BYTES } from './pagination.js';
import type { Scope } from './scope.js';

/** A new project as the contract takes it (`POST /v1/projects`). */
export type NewProject = components['schemas']['CreateProjectRequest'];

/** Changes to a project as the contract takes them (`PATCH /v1/projects/{namespace}`); the icon as a data URL, or null to remove it. */
export type ProjectChanges = components['schemas']['UpdateProjectRequest'];

/**
 * Holds, at compile time, that the code reads every field the contract gives a request: `rest` is
 * what a destructuring left, and a field added to the contract and not handled lands there.
 */
function allFieldsHandled(_rest: Record<string, never>): void {}

const NAMESPACE_TAKEN = {
  projects_namespace_unique: ['namespace_taken', 'Another project already uses this namespace.'],
} as const satisfies Parameters<typeof conflictOn>[1];

/** A project by id, with what its answer shows. */
export async function loadProject(em: EntityManager, id: string): Promise<ProjectView> {
  const [view] = await viewProjects(em, [await getProject(em, id)]);
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
  const rows = await projectContentsWithin(
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

/**
 * The delete of one project inside the caller's transaction `tx` (a project's own delete, or an
 * account's delete of the projects it owns alone), whoever may delete it decided by the caller:
 * lock, cancel, delete, as `Projects.remove` says. A failed cancel throws, and the caller's whole
 * transaction rolls back.
 */
export async function deleteProjectIn(tx: EntityManager, billing: SubscriptionCanceller, projectId: string): Promise<void> {
  await lockProject(tx, projectId, 'update');
  const { billingId } = await getProjectAfresh(tx, projectId);
  if (billingId) await billing.cancelSubscription(billingId);
  await deleteProjectRow(tx, projectId);
}

/** What the projects module is built with (services.ts). */
export interface ProjectsDeps {
  icons: IconStore;
  billing: SubscriptionCanceller;
  limits: Limits;
  shapes: ChangeShapes;
}

/** Projects: create, list, change, delete. The icons, the billing adapter, the caps and the webhook shapes come with the module. */
export class Projects {
  constructor(private readonly deps: ProjectsDeps) {}

  /**
   * Creates a project owned by the caller, with its first feed; 409 `limit_reached` when the caller
   * owns as many projects as a user may. The owner's row is locked while its projects are counted,
   * so concurrent creates of one user pass the cap one at a time.
   */
  async create({ em, caller }: Scope, input: NewProject): Promise<ProjectView> {
    const owner = caller.user;
    const { name: givenName, namespace, icon: givenIcon, ...rest } = input;
    allFieldsHandled(rest);
    // A refused icon is refused before anything is written.
    const icon = givenIcon === undefined ? undefined : await this.deps.icons.parse(givenIcon, 'create', '/body/icon', owner.id);
    const name = givenName.trim();
    const create = () =>
      transaction(em, async (tx) => {
        await lockUser(tx, owner.id);
        const owned = await countOwnedProjects(tx, owner.id);
        refuseAtCap(this.deps.limits, 'projectsPerUser', owned, `You own ${owned} projects`);
        const project = addProject(tx, owner, { namespace, name, icon: icon?.sha256 ?? null });
        recordActivity(tx, { project, actor: owner, type: 'project.created', data: { namespace: project.namespace, name } });
        await writeChanges(tx);
        // After the write (which refuses a taken namespace), before the commit: a refused project stores no icon.
        if (icon) await this.deps.icons.save(tx, icon);
        return loadProject(tx, project.id);
      });
    return conflictOn(create, NAMESPACE_TAKEN);
  }

  /**
   * A page of the caller's projects, those its credential reaches (its grant); `more` when projects
   * beyond those answered remain.
   */
  async list({ em, caller }: Scope, page: PageRequest): Promise<{ views: ProjectView[]; more: boolean }> {
    // The page is chosen first (filtering on the caller's membership), then its members and feeds loaded.
    const projects = await memberProjectsPage(em, caller.userId, page, caller.grant.projectIds);
    const wanted = projects.slice(0, page.limit);
    const views = await viewProjects(em, wanted);
    return { views, more: projects.length > page.limit || views.length < wanted.length };
  }

  /** The owner changes the project's name, namespace or icon; 403 `not_owner` when the caller no longer owns it. */
  async change({ em, caller }: Scope, project: Project, changes: ProjectChanges): Promise<ProjectView> {
    const actor = caller.user;
    const { name: givenName, namespace, icon: givenIcon, ...rest } = changes;
    allFieldsHandled(rest);
    const icon = typeof givenIcon === 'string' ? await this.deps.icons.parse(givenIcon, 'update', '/body/icon', actor.id) : undefined;
    const update = () =>
      transaction(em, async (tx) => {
        await lockProject(tx, project.id, 'update');
        await confirmAccess(tx, project.id, actor, 'project.update');
        const current = await getProjectAfresh(tx, project.id);
        const changed: Record<string, unknown> = {};
        const name = givenName?.trim();
        if (name !== undefined && name !== current.name) {
          changed.name = { from: current.name, to: name };
          current.name = name;
        }
        if (namespace !== undefined && namespace !== current.namespace) {
          changed.namespace = { from: current.namespace, to: namespace };
          current.namespace = namespace;
        }
        const nextIcon = givenIcon === undefined ? current.icon : (icon?.sha256 ?? null);
        if (nextIcon !== current.icon) {
          changed.icon = nextIcon === null ? 'removed' : 'changed';
          current.icon = nextIcon;
        }
        if (Object.keys(changed).length > 0)
          recordActivity(tx, { project: current, actor, type: 'project.updated', data: { changes: changed } });
        await writeChanges(tx);
        if (icon) await this.deps.icons.save(tx, icon);
        const view = await loadProject(tx, project.id);
        if (Object.keys(changed).length > 0) await queueChange(tx, project.id, 'project.updated', this.deps.shapes.project(view));
        return view;
      });
    return conflictOn(update, NAMESPACE_TAKEN);
  }

  /**
   * The owner deletes a project and, by the schema's cascades, everything attached to it, in one
   * statement; 403 `not_owner` when the caller no longer owns it once the project's row is locked (a
   * transfer committed after the access check). A subscription is cancelled first: if that fails,
   * nothing is deleted. The project row is locked FOR UPDATE from before the cancel until the delete
   * commits, so of two concurrent deletes only one ever calls Stripe; the other then finds no row and
   * answers 404. Every writer of the project locks its row before its children (transaction.ts), so
   * the delete's cascade never waits for a child a writer holds while that writer waits for the
   * project. The Stripe call is bounded by the adapter's deadline, so the lock is never held longer
   * than that. Everything in the transaction goes through `tx`: in embedded mode the pool has one
   * connection, which it holds.
   */
  async remove({ em, caller }: Scope, project: Project): Promise<void> {
    await transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'update');
      await confirmAccess(tx, project.id, caller.user, 'project.delete');
      await deleteProjectIn(tx, this.deps.billing, project.id);
    });
  }
}
