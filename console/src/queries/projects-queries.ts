/**
 * Projects in the query cache: one project (with its members and feeds, so a change to either
 * refreshes it), the list of the person's projects, and what a project's page asks for first.
 * Small, and imported by the shell, so that a project's address starts its requests while the
 * page's code is still on its way (`prefetchProjectPage`).
 */
import { queryOptions, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { sb, type Project } from '../api.ts';
import { filtersOf, historyQuery } from './events-queries.ts';

/** Every single project's key starts so: a change seen in all of them (the person's own username or icon) refreshes them all. */
const eachProject = ['project'] as const;

export const projectKeys = {
  each: eachProject,
  one: (namespace: string) => [...eachProject, namespace] as const,
  list: ['projects'] as const,
};

export const projectQuery = (namespace: string) =>
  queryOptions({ queryKey: projectKeys.one(namespace), queryFn: () => sb.projects.get(namespace) });

export const projectsQuery = queryOptions({ queryKey: projectKeys.list, queryFn: () => sb.projects.list({ limit: 100 }).page() });

/** The project again: after a change to its members or feeds. */
export const invalidateProject = (client: QueryClient, namespace: string) =>
  client.invalidateQueries({ queryKey: projectKeys.one(namespace) });

/** Reads the project again when called: a mutation's `onSuccess` after a change to its members or feeds. */
export function useInvalidateProject(namespace: string): () => Promise<void> {
  const client = useQueryClient();
  return () => invalidateProject(client, namespace);
}

export const invalidateProjects = (client: QueryClient) => client.invalidateQueries({ queryKey: projectKeys.list });

/** Every project read again: they show the person among their members. */
export const invalidateEveryProject = (client: QueryClient) => client.invalidateQueries({ queryKey: projectKeys.each });

/** A project as the service answered a change to it, under its (perhaps new) namespace, and the list read again. */
export function projectChanged(client: QueryClient, project: Project): Promise<void> {
  client.setQueryData(projectKeys.one(project.namespace), project);
  return invalidateProjects(client);
}

/** A project the person no longer sees (deleted, or left): forgotten, and the list read again. */
export function projectGone(client: QueryClient, namespace: string): Promise<void> {
  client.removeQueries({ queryKey: projectKeys.one(namespace) });
  return invalidateProjects(client);
}

/**
 * Asks for what a project's page shows first: the project, and on the live feed (`page` is the
 * address after `/projects/{namespace}`, empty for the feed) its first page of events. Asking
 * before the session is known is safe: a visitor without one gets 401s that nothing shows, and
 * the login page.
 */
export function prefetchProjectPage(client: QueryClient, namespace: string, page: string, search: string): void {
  void client.prefetchQuery(projectQuery(namespace));
  if (page === '' || page === '/') void client.prefetchInfiniteQuery(historyQuery(namespace, filtersOf(new URLSearchParams(search))));
}
