/**
 * Cursor pagination over UUID v7 ids: they sort by creation time, so "newest first" is `id desc`
 * and a cursor is the last id seen, opaque to clients (db/page.ts reads a page below one). A page holds at most `limit` items and at
 * most `PAGE_BYTES` of them, so no list answers more than 1 MiB whatever its items hold.
 */
import { encodeCursor, type PageRequest } from '../db/page.js';

export type { PageRequest };

/** The page a validated query asks for; the contract's validator has already applied `limit`'s default. */
export function pageRequest(query: { limit?: number; cursor?: string }): PageRequest {
  if (query.limit === undefined) throw new Error('limit missing: the contract gives it a default');
  return { limit: query.limit, cursor: query.cursor };
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
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
  return { items, next_cursor: (cut || more) && last ? encodeCursor(last.id) : null };
}
