import type { Project } from '../../api.ts';

/**
 * Props of every tab of a project's page (pages/project.tsx draws the tabs). A module of its own,
 * so that the tabs name it without importing the page that imports them.
 */
export interface ProjectPageProps {
  project: Project;
}
