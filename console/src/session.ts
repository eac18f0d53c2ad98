/** Who is signed in: `users.me` through the query cache, and the ways in and out. */
import { useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { sb, type User } from './api.ts';
import { meQuery, setMe } from './queries/account-queries.ts';

/** The signed-in user; `user` null when there is none. */
export function useMe(): { user: User | null | undefined; error: unknown; isLoading: boolean } {
  const query = useQuery(meQuery);
  return { user: query.data, error: query.error, isLoading: query.isLoading };
}

/** Forget everything cached for the previous person and start again as `user` (or nobody). */
export function signedIn(client: QueryClient, user: User | null): void {
  client.clear();
  setMe(client, user);
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
