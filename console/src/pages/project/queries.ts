/**
 * What a project's pages ask the service for first, as query-cache entries: the project itself,
 * and the live feed's history. A module of its own, small and imported by the shell, so that a
 * project's address starts both requests while the page's code is still on its way (`preload`).
 */
import type { QueryClient } from '@tanstack/react-query';
import { sb } from '../../api.ts';
import type { Filters } from './filters.ts';

/** Events in the feed's first page, and in each one "Load more" brings (the most the API gives). */
const PAGE = 50;
const MORE = 100;

export const projectKey = (namespace: string) => ['project', namespace] as const;

export const projectQuery = (namespace: string) => ({ queryKey: projectKey(namespace), queryFn: () => sb.projects.get(namespace) });

/** The feed's filters, as its address carries them. */
export function filtersOf(params: URLSearchParams): Filters {
  return {
    feed: params.get('feed') || undefined,
    tag: params.getAll('tag').filter(Boolean),
    user_id: params.get('user_id') || undefined,
    q: params.get('q') || undefined,
  };
}

/** The feed's history, a page at a time (the live stream keeps it current). */
export function historyQuery(namespace: string, filters: Filters) {
  return {
    queryKey: ['events', namespace, JSON.stringify(filters)],
    queryFn: ({ pageParam }: { pageParam: string | undefined }) =>
      sb.events
        .list(namespace, {
          limit: pageParam ? MORE : PAGE,
          ...(filters.feed ? { feed: filters.feed } : {}),
          ...(filters.tag.length ? { tag: filters.tag } : {}),
          ...(filters.user_id ? { user_id: filters.user_id } : {}),
          ...(filters.q ? { q: filters.q } : {}),
          ...(pageParam ? { cursor: pageParam } : {}),
        })
        .page(),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page: { next_cursor: string | null }) => page.next_cursor ?? undefined,
    staleTime: Infinity,
  };
}

/**
 * Asks for what a project's page shows first: the project, and on the live feed (`page` is the
 * address after `/projects/{namespace}`, empty for the feed) its first page of events. Asking
 * before the session is known is safe: a visitor without one gets 401s that nothing shows, and
 * the login page.
 */
export function preload(client: QueryClient, namespace: string, page: string, search: string): void {
  void client.prefetchQuery(projectQuery(namespace));
  if (page === '' || page === '/') void client.prefetchInfiniteQuery(historyQuery(namespace, filtersOf(new URLSearchParams(search))));
}
