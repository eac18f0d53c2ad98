/**
 * The `icons` table: an icon's row (with its bytes when the database is the icon store), reading
 * them, and deleting the rows of icons nothing refers to: old ones (the prune), and those a user
 * stored last (their next change). Which columns refer to an icon is said once, in `ICON_REFERENCES`.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';

/**
 * Every column that names an icon by its key. An icon is kept while a row of any of them names it:
 * a new kind of icon (a user's, say) is one more entry here, and pruning keeps its icons.
 */
const ICON_REFERENCES = [
  { table: 'projects', column: 'icon' },
  { table: 'users', column: 'icon' },
] as const;

// A stored copy's `stored_at` is moved to now rather than the insert skipped: the update holds the
// row's lock until the caller's transaction ends, and its fresh time keeps the prune away after
// that (see PRUNE). The bytes, identical for a key, are filled in when the row had none. The user
// who stores it becomes the one whose next change may release it.
const RECORD = `insert into icons (sha256, size, bytes, stored_at, recorded_by) values (?, ?, ?, now(), ?)
  on conflict (sha256) do update set stored_at = excluded.stored_at, bytes = coalesce(icons.bytes, excluded.bytes),
    recorded_by = coalesce(excluded.recorded_by, icons.recorded_by)`;

/**
 * Records the icon in `tx` (its bytes too unless `bytes` is null), or marks its row as just stored,
 * by `userId` when there is one; either way the row stays locked until `tx` ends. Concurrent records
 * of one key make one row.
 */
export async function recordIcon(
  tx: EntityManager,
  sha256: string,
  size: number,
  bytes: Buffer | null,
  userId: string | null,
): Promise<void> {
  await query(tx, RECORD, [sha256, size, bytes, userId]);
}

const BYTES = 'select bytes from icons where sha256 = ?';

/** The icon's bytes; undefined when there is no row, null when the row holds none (the bucket does). */
export async function iconBytes(em: EntityManager, sha256: string): Promise<Buffer | null | undefined> {
  const [row] = await query<{ bytes: Buffer | null }>(em, BYTES, [sha256]);
  return row?.bytes;
}

const UNREFERENCED = ICON_REFERENCES.map(({ table, column }) => `not exists (select 1 from ${table} r where r.${column} = i.sha256)`).join(
  ' and ',
);

// Oldest first, on the `stored_at` index. A row a transaction has just recorded is locked by it: the
// batch skips it rather than wait. One recorded by a transaction that committed after this
// statement's snapshot was taken is read again once locked (PostgreSQL re-checks a locked row's
// newest version): its `stored_at` is new, so it is not deleted even though the snapshot cannot see
// the reference that transaction made.
const PRUNE = `with gone as (
    delete from icons where sha256 = any(array(
      select i.sha256 from icons i
      where i.stored_at < now() - ?::float8 * interval '1 millisecond' and ${UNREFERENCED}
      order by i.stored_at limit ? for update skip locked
    )) returning sha256
  )
  select sha256 from gone`;

// The icons the user recorded last that nothing refers to, locked; rows another transaction holds
// (a change recording one again, a prune removing it) are passed over.
const LOCK_RELEASABLE = `select i.sha256 from icons i
  where i.recorded_by = ? and i.sha256 <> ? and ${UNREFERENCED}
  for update of i skip locked`;

// Run after LOCK_RELEASABLE, as a statement of its own: its snapshot is taken once the rows are
// locked, so it sees the reference of any change that recorded one of them and committed before
// the lock was had (LOCK_RELEASABLE's own snapshot may predate that commit).
const DELETE_UNREFERENCED = `delete from icons i where i.sha256 = any(?::char(64)[]) and ${UNREFERENCED} returning i.sha256`;

/**
 * Deletes in `tx` the rows of the icons `userId` recorded last that nothing refers to, but `keep`,
 * and answers their keys. A change making one of them its icon concurrently either holds its row
 * (passed over), committed before (its reference is seen), or records it after `tx` ends, which
 * inserts it anew. Referring to an icon always goes with recording it (storage/icons.ts `save`).
 */
export async function releaseIcons(tx: EntityManager, userId: string, keep: string): Promise<string[]> {
  const locked = await query<{ sha256: string }>(tx, LOCK_RELEASABLE, [userId, keep]);
  if (locked.length === 0) return [];
  const rows = await query<{ sha256: string }>(tx, DELETE_UNREFERENCED, [locked.map((row) => row.sha256)]);
  return rows.map((row) => row.sha256);
}

/**
 * Deletes at most `limit` rows of icons that nothing refers to and that were not recorded in the
 * last `graceMs` (by the database's clock), and answers their keys. In a transaction, the rows stay
 * locked until it ends: a concurrent `recordIcon` of one of them waits, then inserts it anew.
 */
export async function deleteUnreferencedIcons(em: EntityManager, graceMs: number, limit: number): Promise<string[]> {
  const rows = await query<{ sha256: string }>(em, PRUNE, [graceMs, limit]);
  return rows.map((row) => row.sha256);
}
