/** Invites in the query cache: a project's pending ones, and those the signed-in person received. */
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { sb } from '../api.ts';

export const inviteKeys = {
  project: (namespace: string) => ['invites', namespace] as const,
  received: ['received-invites'] as const,
};

export const projectInvitesQuery = (namespace: string) =>
  queryOptions({ queryKey: inviteKeys.project(namespace), queryFn: () => sb.invites.list(namespace, { limit: 100 }).page() });

export const receivedInvitesQuery = queryOptions({
  queryKey: inviteKeys.received,
  queryFn: () => sb.users.listReceivedInvites({ limit: 100 }).page(),
});

export const invalidateProjectInvites = (client: QueryClient, namespace: string) =>
  client.invalidateQueries({ queryKey: inviteKeys.project(namespace) });

export const invalidateReceivedInvites = (client: QueryClient) => client.invalidateQueries({ queryKey: inviteKeys.received });
