/** The account's API tokens in the query cache. */
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { sb } from '../api.ts';

export const tokenKeys = { list: ['tokens'] as const };

export const tokensQuery = queryOptions({ queryKey: tokenKeys.list, queryFn: () => sb.tokens.list({ limit: 100 }).page() });

export const invalidateTokens = (client: QueryClient) => client.invalidateQueries({ queryKey: tokenKeys.list });
