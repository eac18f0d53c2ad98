/** The signed-in account in the query cache: who it is, and its sessions. */
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { sb, statusOf, type User } from '../api.ts';

export const accountKeys = {
  me: ['me'] as const,
  sessions: ['sessions'] as const,
};

/** Who is signed in: null when the service answers 401 (no session, or it ended). */
export const meQuery = queryOptions({
  queryKey: accountKeys.me,
  queryFn: async (): Promise<User | null> => {
    try {
      return await sb.users.me();
    } catch (error) {
      if (statusOf(error) === 401) return null;
      throw error;
    }
  },
  staleTime: 60_000,
});

/** Who is signed in as far as the cache knows, without asking. */
export const cachedMe = (client: QueryClient) => client.getQueryData(meQuery.queryKey);

export const setMe = (client: QueryClient, user: User | null) => client.setQueryData(meQuery.queryKey, user);

export const sessionsQuery = queryOptions({ queryKey: accountKeys.sessions, queryFn: () => sb.sessions.list({ limit: 100 }).page() });

export const invalidateSessions = (client: QueryClient) => client.invalidateQueries({ queryKey: accountKeys.sessions });
