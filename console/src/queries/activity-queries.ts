/** A project's activity in the query cache, newest first, a page at a time. */
import { infiniteQueryOptions } from '@tanstack/react-query';
import { sb } from '../api.ts';

export const activityKeys = { list: (namespace: string) => ['activity', namespace] as const };

export const activityQuery = (namespace: string) =>
  infiniteQueryOptions({
    queryKey: activityKeys.list(namespace),
    queryFn: ({ pageParam }) => sb.activity.list(namespace, { limit: 50, ...(pageParam ? { cursor: pageParam } : {}) }).page(),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => page.next_cursor ?? undefined,
  });
