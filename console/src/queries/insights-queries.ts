/** A project's insights in the query cache. */
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { sb } from '../api.ts';

export const insightKeys = { list: (namespace: string) => ['insights', namespace] as const };

export const insightsQuery = (namespace: string) =>
  queryOptions({ queryKey: insightKeys.list(namespace), queryFn: () => sb.insights.list(namespace, { limit: 100 }).page() });

export const invalidateInsights = (client: QueryClient, namespace: string) =>
  client.invalidateQueries({ queryKey: insightKeys.list(namespace) });
