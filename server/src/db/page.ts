/**
 * Cursors, and a page of an entity's rows by cursor. Ids are UUID v7: they sort by creation time,
 * so "newest first" is `id desc` and a cursor is the last id seen, opaque to clients
 * (domain/pagination.ts cuts a page to its byte budget).
 */
import type { EntityManager, EntityName, FilterQuery, FindOptions } from '@mikro-orm/postgresql';
import { InvalidRequest } from '../errors.js';

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The id to continue below, or undefined for the first page. A cursor we did not issue is 400. */
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!UUID.test(id)) throw InvalidRequest.field('/query/cursor', 'is not a cursor this service issued');
  return id;
}

/** The cursor that continues below `id`. */
export function encodeCursor(id: string): string {
  return Buffer.from(id, 'utf8').toString('base64url');
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
