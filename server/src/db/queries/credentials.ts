/**
 * The credential a presented token stands for, with its user, and the record of its use: what every
 * authenticated request may run. The lookup is written out (raw.ts says why not `find`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiToken, Session, User } from '../entities.js';
import { mapRow, query, selectColumns, sqlOnce } from '../raw.js';

export type CredentialKind = 'session' | 'api';

const TABLE: Record<CredentialKind, string> = { session: 'sessions', api: 'api_tokens' };

/**
 * A credential and its user's columns (prefixed `u__`). Timestamps arrive as text: MikroORM's
 * driver leaves their parsing to the entity mapping.
 */
export type CredentialRow = {
  credential_id: string;
  expires_at: string | null;
  last_used_at: string | null;
  u__id: string;
  u__username: string;
} & Record<string, unknown>;

/** The credential of `kind` whose token hashes to `tokenHash`, with its user, in one statement; undefined when none. */
export async function findCredential(em: EntityManager, kind: CredentialKind, tokenHash: string): Promise<CredentialRow | undefined> {
  const table = TABLE[kind];
  const sql = sqlOnce(
    `credential:${table}`,
    () =>
      `select c.id as credential_id, c.expires_at, c.last_used_at, ${selectColumns(em, User, 'u', 'u')}
     from ${table} c join users u on u.id = c.user_id where c.token_hash = ?`,
  );
  const [row] = await query<CredentialRow>(em, sql, [tokenHash]);
  return row;
}

/** The row's user as the managed entity, merged into the request's identity map. */
export function credentialUser(em: EntityManager, row: CredentialRow): User {
  return mapRow(em, User, row, 'u');
}

/** Records a session's use: when, and the expiry its idle time now runs to. */
export async function touchSession(em: EntityManager, id: string, usedAt: Date, expiresAt: Date): Promise<void> {
  await em.nativeUpdate(Session, { id }, { lastUsedAt: usedAt, expiresAt });
}

/** Records an API token's use. */
export async function touchApiToken(em: EntityManager, id: string, usedAt: Date): Promise<void> {
  await em.nativeUpdate(ApiToken, { id }, { lastUsedAt: usedAt });
}

const DELETE_OTHER_SESSIONS = 'delete from sessions where user_id = ? and id <> ? returning id';

/** Deletes every session of the user but `keepId`, and answers the ids deleted. */
export async function deleteOtherSessions(em: EntityManager, userId: string, keepId: string): Promise<string[]> {
  const rows = await query<{ id: string }>(em, DELETE_OTHER_SESSIONS, [userId, keepId]);
  return rows.map((row) => row.id);
}

/**
 * Locks the user's row (FOR NO KEY UPDATE, as `lockUserRow`) if its password hash is still
 * `passwordHash`: false when it changed. A change committed meanwhile, or holding the row now, is
 * seen: the lock waits for it and then reads the row it wrote.
 */
export async function lockUserWithPassword(tx: EntityManager, userId: string, passwordHash: string): Promise<boolean> {
  return (await query(tx, 'select 1 from users where id = ? and password_hash = ? for no key update', [userId, passwordHash])).length > 0;
}

/** Ends the user's sessions past the `keep` used most recently: the ids ended. */
export async function endSessionsPastCap(em: EntityManager, userId: string, keep: number): Promise<string[]> {
  const rows = await query<{ id: string }>(
    em,
    `delete from sessions where id in
       (select id from sessions where user_id = ? order by last_used_at desc, id desc offset ?)
     returning id`,
    [userId, keep],
  );
  return rows.map((row) => row.id);
}
