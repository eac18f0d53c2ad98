/**
 * A project as its answers and its webhook deliveries show it: the rows it is read into. A module of
 * its own, below projects.ts, so that the modules projects.ts uses (access.ts, the change shapes)
 * can name it without importing projects.ts.
 */
import type { ProjectContents, ProjectFields } from '../db/repositories/projects-rows.js';

export type { FeedRow, MemberRow, ProjectFields } from '../db/repositories/projects-rows.js';

/**
 * A project with what its answer shows. Members and feeds are plain rows, not managed entities: an
 * answer never changes them, and mapping a project's 45 of them into the identity map costs more CPU
 * than running the statements (docs/performance-journal.md has the figures). `id` is the project's, for pagination.
 */
export interface ProjectView extends ProjectContents {
  id: string;
  project: ProjectFields;
}
