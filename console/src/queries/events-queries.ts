/**
 * A project's events in the query cache: the live feed's history, a page at a time, under the
 * filters its address carries (the live stream keeps it current).
 */
import { infiniteQueryOptions, type QueryClient } from '@tanstack/react-query';
import { sb } from '../api.ts';
import type { Filters } from '../pages/project/filters.ts';

/** Events in the feed's first page, and in each one "Load more" brings (the most the API gives). */
const PAGE = 50;
const MORE = 100;

export const eventKeys = {
  history: (namespace: string, filters: Filters) => ['events', namespace, JSON.stringify(filters)] as const,
};

/** The feed's filters, as its address carries them. */
export function filtersOf(params: URLSearchParams): Filters {
  return {
    feed: params.get('feed') || undefined,
    tag: params.getAll('tag').filter(Boolean),
    user_id: params.get('user_id') || undefined,
    q: params.get('q') || undefined,
  };
}

/** The feed's history, a page at a time. */
export function historyQuery(namespace: string, filters: Filters) {
  return infiniteQueryOptions({
    queryKey: eventKeys.history(namespace, filters),
    queryFn: ({ pageParam }) =>
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
    getNextPageParam: (page) => page.next_cursor ?? undefined,
    staleTime: Infinity,
  });
}

/** The history cut back to its first page, so that reading it again starts from the newest events. */
export function keepFirstHistoryPage(client: QueryClient, namespace: string, filters: Filters): void {
  client.setQueryData(historyQuery(namespace, filters).queryKey, (data) =>
    data ? { pages: data.pages.slice(0, 1), pageParams: data.pageParams.slice(0, 1) } : data,
  );
}
