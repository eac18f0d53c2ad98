/** A project's webhook endpoints in the query cache, and each one's deliveries, a page at a time. */
import { infiniteQueryOptions, queryOptions, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { sb } from '../api.ts';

/** Deliveries in each page of the log. */
const DELIVERIES = 20;

export const webhookKeys = {
  list: (namespace: string) => ['webhooks', namespace] as const,
  deliveries: (namespace: string, id: string) => ['webhook-deliveries', namespace, id] as const,
};

export const webhooksQuery = (namespace: string) =>
  queryOptions({ queryKey: webhookKeys.list(namespace), queryFn: () => sb.webhooks.list(namespace, { limit: 100 }).page() });

export const deliveriesQuery = (namespace: string, id: string) =>
  infiniteQueryOptions({
    queryKey: webhookKeys.deliveries(namespace, id),
    queryFn: ({ pageParam }) =>
      sb.webhooks.deliveries(namespace, id, { limit: DELIVERIES, ...(pageParam ? { cursor: pageParam } : {}) }).page(),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => page.next_cursor ?? undefined,
  });

export const invalidateWebhooks = (client: QueryClient, namespace: string) =>
  client.invalidateQueries({ queryKey: webhookKeys.list(namespace) });

/** Reads the endpoints again when called: a mutation's `onSuccess`. */
export function useInvalidateWebhooks(namespace: string): () => Promise<void> {
  const client = useQueryClient();
  return () => invalidateWebhooks(client, namespace);
}

/** An endpoint's log and the list after a delivery sent again: its state and the count waiting change with it. */
export async function invalidateDeliveries(client: QueryClient, namespace: string, id: string): Promise<void> {
  await client.invalidateQueries({ queryKey: webhookKeys.deliveries(namespace, id) });
  await invalidateWebhooks(client, namespace);
}
