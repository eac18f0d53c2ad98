/**
 * Cursor pagination over UUID v7 ids: they sort by creation time, so "newest first" is `id desc`
 * and a cursor is the last id seen, opaque to clients. A page holds at most `limit` items and at
 * most `PAGE_BYTES` of them, so no list answers more than 1 MiB whatever its items hold.
 */
import type { EntityManager, EntityName, FilterQuery, FindOptions } from '@mikro-orm/postgresql';
import { InvalidRequest } from '../errors.js';

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
}

/** The page a validated query asks for; the contract's validator has already applied `limit`'s default. */
export function pageRequest(query: { limit?: number; cursor?: string }): PageRequest {
  if (query.limit === undefined) throw new Error('limit missing: the contract gives it a default');
  return { limit: query.limit, cursor: query.cursor };
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The id to continue below, or undefined for the first page. A cursor we did not issue is 400. */
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!UUID.test(id)) throw InvalidRequest.field('/query/cursor', 'is not a cursor this service issued');
  return id;
}

/**
 * One page of rows matching `where`, newest first, fetched with one row more than asked so that
 * toPage can tell whether another page exists. `options` may add populate hints, never an order.
 */
export async function findPage<T extends { id: string }, P extends string = never>(
  em: EntityManager,
  entity: EntityName<T>,
  where: FilterQuery<T>,
  page: PageRequest,
  options: Omit<FindOptions<T, P>, 'orderBy' | 'limit'> = {},
) {
  const below = decodeCursor(page.cursor);
  const filter = (below ? { $and: [where, { id: { $lt: below } }] } : where) as FilterQuery<T>;
  return em.find(entity, filter, { ...options, orderBy: { id: 'desc' }, limit: page.limit + 1 } as FindOptions<T, P>);
}

/**
 * The most bytes of JSON a page's items may fill: 1 MiB less room for the envelope
 * (`{"success":true,"data":{"items":[…],"next_cursor":"…"}}`), so that the answer stays under 1 MiB.
 */
export const PAGE_BYTES = 1024 * 1024 - 1024;

/**
 * The page of `rows`, which were fetched with `limit + 1`: the extra row only says whether another
 * page exists; `more` says so instead when the fetch itself stopped short (domain/projects.ts).
 * Items are added while they fit in `PAGE_BYTES` (as UTF-8 JSON, the way they are sent); a page
 * always holds at least one, and one cut short by the budget continues, through its cursor, from
 * its last item.
 */
export function toPage<R extends { id: string }, T>(rows: R[], limit: number, present: (row: R) => T, more = rows.length > limit): Page<T> {
  const items: T[] = [];
  let bytes = 0;
  let cut = false;
  for (const row of rows.slice(0, limit)) {
    const item = present(row);
    bytes += Buffer.byteLength(JSON.stringify(item)) + 1; // and its comma
    if (items.length > 0 && bytes > PAGE_BYTES) {
      cut = true;
      break;
    }
    items.push(item);
  }
  const last = rows[items.length - 1];
  return { items, next_cursor: (cut || more) && last ? Buffer.from(last.id, 'utf8').toString('base64url') : null };
}
