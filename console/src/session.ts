/** Who is signed in: `users.me` through the query cache, and the ways in and out. */
import { useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { sb, statusOf, type User } from './api.ts';

export const meKey = ['me'] as const;

/** Who is signed in, as a query: null when the service answers 401 (no session, or it ended). */
export const meQuery = {
  queryKey: meKey,
  queryFn: async (): Promise<User | null> => {
    try {
      return await sb.users.me();
    } catch (error) {
      if (statusOf(error) === 401) return null;
      throw error;
    }
  },
  staleTime: 60_000,
};

/** The signed-in user; `user` null when there is none. */
export function useMe(): { user: User | null | undefined; error: unknown; isLoading: boolean } {
  const query = useQuery(meQuery);
  return { user: query.data, error: query.error, isLoading: query.isLoading };
}

/** Forget everything cached for the previous person and start again as `user` (or nobody). */
export function signedIn(client: QueryClient, user: User | null): void {
  client.clear();
  client.setQueryData(meKey, user);
}

export function useSignOut(): () => Promise<void> {
  const client = useQueryClient();
  return async () => {
    try {
      await sb.auth.logout();
    } finally {
      signedIn(client, null);
    }
  };
}
