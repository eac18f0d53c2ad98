/** The service's own description (`GET /v1`) in the query cache: the limits its operator set, which a page shows. */
import { queryOptions } from '@tanstack/react-query';
import { sb } from '../api.ts';

export const serviceKeys = { root: ['service'] as const };

/** Asked once per tab: the limits change only when the service restarts with other settings. */
export const serviceQuery = queryOptions({ queryKey: serviceKeys.root, queryFn: () => sb.meta.root(), staleTime: Infinity });
