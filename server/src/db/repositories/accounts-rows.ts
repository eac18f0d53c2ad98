/**
 * The accounts aggregate: users, their credentials (sessions and API tokens), their password reset
 * tokens and e-mail changes. Every read and write of those tables is here (docs/development.md,
 * Layers). Token secrets are never stored, only their SHA-256; times that bound a token's life are
 * the database's clock, so they do not depend on the clock of the instance that wrote or reads them.
 * The credential lookup runs on every authenticated request, so it is written out (raw.ts says why
 * not `find`).
 */
import { raw, type EntityManager } from '@mikro-orm/postgresql';
import { ApiToken, Session, User, type ApiTokenScope } from '../entities.js';
import { afterCommit } from '../commit-notices.js';
import { findPage, type PageRequest } from '../page.js';
import { mapRow, query, selectColumns, sqlOnce } from '../raw.js';
import { unnestInsert } from '../columns.js';

// ---------- Users ----------

/**
 * Usernames are stored lower-case (a check constraint holds it) and compared so; e-mail addresses
 * keep their case and are unique without regard to it (the `users_email_lower_unique` index). The
 * lookups and writes below apply that, so no caller lower-cases a name itself. A trigger also
 * refuses, as that index would, an address a live undo link of another account restores
 * (Migration20261203000000_email_reservations): `insertUser` and `setEmail` fail on it as on a
 * taken one.
 */
const usernameKey = (username: string) => username.toLowerCase();

/** The user whose e-mail address is `email` without regard to case, or null. */
export async function findUserByEmail(em: EntityManager, email: string): Promise<User | null> {
  return em.findOne(User, { [raw('lower(email)')]: email.toLowerCase() });
}

/** The id of the user with this username, in any case, or undefined. */
export async function findUserIdByUsername(em: EntityManager, username: string): Promise<string | undefined> {
  return (await em.findOne(User, { username: usernameKey(username) }, { fields: ['id'] }))?.id;
}

/** The user with this username, in any case, or null. */
export async function findUserByUsername(em: EntityManager, username: string): Promise<User | null> {
  return em.findOne(User, { username: usernameKey(username) });
}

/** Whether the database holds any account at all (none: the service's first run). */
export async function anyUser(em: EntityManager): Promise<boolean> {
  return (await em.find(User, {}, { fields: ['id'], limit: 1 })).length > 0;
}

/** A new user, written at once (so that a taken username or address fails here, as its 409). */
export async function insertUser(em: EntityManager, fields: { username: string; email: string; passwordHash: string }): Promise<User> {
  const user = em.create(User, { ...fields, username: usernameKey(fields.username), icon: null });
  await em.flush();
  return user;
}

/** Sets what is given of the user's username and icon key (null: none), read afresh: the user as stored. */
export async function updateUserProfile(
  em: EntityManager,
  userId: string,
  changes: { username?: string; icon?: string | null },
): Promise<User> {
  const user = await em.findOneOrFail(User, { id: userId }, { refresh: true });
  if (changes.username !== undefined) user.username = usernameKey(changes.username);
  if (changes.icon !== undefined) user.icon = changes.icon;
  await em.flush();
  return user;
}

/** Writes `passwordHash` only over `checkedHash`: false when the user's hash is another by now. */
export async function replacePasswordHash(em: EntityManager, userId: string, checkedHash: string, passwordHash: string): Promise<boolean> {
  return (await em.nativeUpdate(User, { id: userId, passwordHash: checkedHash }, { passwordHash, updatedAt: new Date() })) > 0;
}

// ---------- Credentials: sessions and API tokens ----------

export type CredentialKind = 'session' | 'api';

const TABLE: Record<CredentialKind, string> = { session: 'sessions', api: 'api_tokens' };

/**
 * A credential and its user's columns (prefixed `u__`). Timestamps arrive as text: MikroORM's
 * driver leaves their parsing to the entity mapping. An API token's row also has what it may do:
 * `scopes`, and `project_ids`, the projects it is limited to (null when it is not).
 */
export type CredentialRow = {
  credential_id: string;
  last_used_at: string | null;
  u__id: string;
  u__username: string;
  scopes?: ApiTokenScope[];
  project_ids?: string[] | null;
} & Record<string, unknown>;

/** An API token's scopes and the projects it is limited to, as JSON (which both database drivers parse alike). */
const TOKEN_GRANT = `, to_json(c.scopes) as scopes,
  case when c.limited_to_projects
    then coalesce((select json_agg(tp.project_id) from api_token_projects tp where tp.token_id = c.id), '[]') end as project_ids`;

/**
 * The one rule of a credential's life, on the database's clock: a session or API token of table
 * alias `alias` is live while it has no expiry or its expiry is still ahead. Every query that
 * accepts a credential (the lookup below, the sessions' list, the live streams' re-check) uses it.
 */
export function liveCredential(alias?: string): string {
  const column = alias === undefined ? 'expires_at' : `${alias}.expires_at`;
  return `(${column} is null or ${column} > now())`;
}

/** The live credential of `kind` whose token hashes to `tokenHash`, with its user, in one statement; undefined when none. */
export async function findCredential(em: EntityManager, kind: CredentialKind, tokenHash: string): Promise<CredentialRow | undefined> {
  const table = TABLE[kind];
  const sql = sqlOnce(
    `credential:${table}`,
    () =>
      `select c.id as credential_id, c.last_used_at, ${selectColumns(em, User, 'u', 'u')}${kind === 'api' ? TOKEN_GRANT : ''}
     from ${table} c join users u on u.id = c.user_id where c.token_hash = ? and ${liveCredential('c')}`,
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

/** Deletes every session of the user but `keepId`. */
export async function deleteOtherSessions(em: EntityManager, userId: string, keepId: string): Promise<void> {
  credentialsEnded(em, await query<{ id: string }>(em, DELETE_OTHER_SESSIONS, [userId, keepId]));
}

/**
 * Locks the user's row (FOR NO KEY UPDATE, as `lockUserRow`) if its password hash is still
 * `passwordHash`: false when it changed. A change committed meanwhile, or holding the row now, is
 * seen: the lock waits for it and then reads the row it wrote.
 */
export async function lockUserWithPassword(tx: EntityManager, userId: string, passwordHash: string): Promise<boolean> {
  return (await query(tx, 'select 1 from users where id = ? and password_hash = ? for no key update', [userId, passwordHash])).length > 0;
}

/** Ends the user's sessions past the `keep` used most recently. */
export async function endSessionsPastCap(em: EntityManager, userId: string, keep: number): Promise<void> {
  const rows = await query<{ id: string }>(
    em,
    `delete from sessions where id in
       (select id from sessions where user_id = ? order by last_used_at desc, id desc offset ?)
     returning id`,
    [userId, keep],
  );
  credentialsEnded(em, rows);
}

/** Credentials deleted in `tx`: once it commits, what they opened (event streams) ends on every instance. */
function credentialsEnded(tx: EntityManager, rows: { id: string }[]): void {
  for (const { id } of rows) afterCommit(tx, { kind: 'credential-ended', credentialId: id });
}

/** What a new session records: its token's hash, its device and its times. */
export interface SessionFields {
  tokenHash: string;
  userAgent: string | null;
  ip: string | null;
  createdAt: Date;
  lastUsedAt: Date;
  expiresAt: Date;
}

/** A new session of the user, written at once. */
export async function insertSession(em: EntityManager, user: User, fields: SessionFields): Promise<Session> {
  const session = em.create(Session, { user, ...fields });
  await em.flush();
  return session;
}

/** Deletes the session (with its device record); whether it was the user's (`userId` given) and existed. */
export async function deleteSession(em: EntityManager, id: string, userId?: string): Promise<boolean> {
  const deleted = (await em.nativeDelete(Session, userId === undefined ? { id } : { id, user: userId })) > 0;
  if (deleted) credentialsEnded(em, [{ id }]);
  return deleted;
}

/** The user's sessions that have not expired, newest first. */
export function sessionPage(em: EntityManager, userId: string, page: PageRequest): Promise<Session[]> {
  return findPage(em, Session, { user: userId, [raw(liveCredential())]: true }, page);
}

export function countApiTokens(em: EntityManager, userId: string): Promise<number> {
  return em.count(ApiToken, { user: userId });
}

const TOKEN_PROJECTS_INSERT = unnestInsert<{ projectId: string }, { tokenId: string }>(
  'api_token_projects',
  { projectId: ['project_id', 'uuid'] },
  { tokenId: ['token_id', 'uuid'] },
);

/**
 * A new API token of the user, written at once; with `projectIds`, limited to those projects (each
 * of which must exist), otherwise reaching every project of its user.
 */
export async function insertApiToken(
  em: EntityManager,
  user: User,
  fields: { name: string; tokenHash: string; createdAt: Date; expiresAt: Date | null; scopes: ApiTokenScope[] },
  projectIds: string[] | undefined,
): Promise<ApiToken> {
  const apiToken = em.create(ApiToken, { user, ...fields, limitedToProjects: projectIds !== undefined, lastUsedAt: null });
  await em.flush();
  if (projectIds?.length) {
    await query(
      em,
      TOKEN_PROJECTS_INSERT.sql,
      TOKEN_PROJECTS_INSERT.params(
        projectIds.map((projectId) => ({ projectId })),
        { tokenId: apiToken.id },
      ),
    );
  }
  return apiToken;
}

/** The user's API tokens, newest first. */
export function apiTokenPage(em: EntityManager, userId: string, page: PageRequest): Promise<ApiToken[]> {
  return findPage(em, ApiToken, { user: userId }, page);
}

const TOKEN_PROJECTS = `select tp.token_id, p.namespace
  from api_token_projects tp join projects p on p.id = tp.project_id
  where tp.token_id = any(?::uuid[])
    and exists (select 1 from project_members m where m.project_id = p.id and m.user_id = ?)
  order by p.namespace collate "C"`;

/**
 * The current namespaces of the projects each of the tokens `tokenIds` is limited to, of which
 * `userId` is still a member, alphabetically; a token limited to none of those has no entry.
 */
export async function tokenProjectNamespaces(em: EntityManager, userId: string, tokenIds: string[]): Promise<Map<string, string[]>> {
  const byToken = new Map<string, string[]>();
  if (tokenIds.length === 0) return byToken;
  for (const row of await query<{ token_id: string; namespace: string }>(em, TOKEN_PROJECTS, [tokenIds, userId])) {
    const namespaces = byToken.get(row.token_id);
    if (namespaces) namespaces.push(row.namespace);
    else byToken.set(row.token_id, [row.namespace]);
  }
  return byToken;
}

/** Deletes one of the user's API tokens: whether it existed. */
export async function deleteApiToken(em: EntityManager, userId: string, id: string): Promise<boolean> {
  const deleted = (await em.nativeDelete(ApiToken, { id, user: userId })) > 0;
  if (deleted) credentialsEnded(em, [{ id }]);
  return deleted;
}

// ---------- Password reset tokens (one row per user), on the database's clock ----------

/** A new token replaces the user's earlier one, used or not, in the same row. */
const ISSUE = `insert into password_reset_tokens as t (user_id, token_hash, created_at, expires_at, used_at)
  values (?, ?, now(), now() + ?::float8 * interval '1 millisecond', null)
  on conflict (user_id) do update
  set token_hash = excluded.token_hash, created_at = excluded.created_at, expires_at = excluded.expires_at, used_at = null`;

/** Issues the user's token, valid for `ttlMs` from now, in place of any earlier one. */
export async function issueResetToken(em: EntityManager, userId: string, tokenHash: string, ttlMs: number): Promise<void> {
  await query(em, ISSUE, [userId, tokenHash, ttlMs]);
}

/** One conditional update: of any number of racing takers of one token, exactly one gets its user. */
const TAKE = `update password_reset_tokens set used_at = now()
  where token_hash = ? and used_at is null and expires_at > now()
  returning user_id`;

/** Uses up the live token hashing to `tokenHash`: its user's id, or undefined when there is none (unknown, used, replaced, expired). */
export async function takeResetToken(em: EntityManager, tokenHash: string): Promise<string | undefined> {
  const [row] = await query<{ user_id: string }>(em, TAKE, [tokenHash]);
  return row?.user_id;
}

/** Voids the user's reset token, if any: a password or e-mail change ends every link made before it. */
export async function voidResetTokens(em: EntityManager, userId: string): Promise<void> {
  await query(em, 'delete from password_reset_tokens where user_id = ?', [userId]);
}

/** Sets the user's password hash. */
export async function setPasswordHash(em: EntityManager, userId: string, passwordHash: string): Promise<void> {
  await query(em, 'update users set password_hash = ?, updated_at = now() where id = ?', [passwordHash, userId]);
}

/** Deletes every session of the user. */
export async function deleteSessionsOf(em: EntityManager, userId: string): Promise<void> {
  credentialsEnded(em, await query<{ id: string }>(em, 'delete from sessions where user_id = ? returning id', [userId]));
}

// ---------- E-mail changes: the pending change (one per user) and its undo tokens, on the database's clock ----------

/** A new request replaces the user's pending change, its address and its token. */
const REQUEST = `insert into email_changes (user_id, new_email, token_hash, created_at, expires_at)
  values (?, ?, ?, now(), now() + ?::float8 * interval '1 millisecond')
  on conflict (user_id) do update
  set new_email = excluded.new_email, token_hash = excluded.token_hash, created_at = excluded.created_at, expires_at = excluded.expires_at`;

/** Records the user's pending change to `newEmail`, valid for `ttlMs` from now, in place of any earlier one. */
export async function requestEmailChange(
  em: EntityManager,
  userId: string,
  newEmail: string,
  tokenHash: string,
  ttlMs: number,
): Promise<void> {
  await query(em, REQUEST, [userId, newEmail, tokenHash, ttlMs]);
}

/** A new token, valid for `ttlMs` from now, for the user's pending change: its address, or undefined when none is pending. */
export async function reissueEmailChange(em: EntityManager, userId: string, tokenHash: string, ttlMs: number): Promise<string | undefined> {
  const [row] = await query<{ new_email: string }>(
    em,
    `update email_changes set token_hash = ?, expires_at = now() + ?::float8 * interval '1 millisecond'
     where user_id = ? returning new_email`,
    [tokenHash, ttlMs, userId],
  );
  return row?.new_email;
}

/** Deleting the row is taking it: of racing takers of one token, exactly one gets the change. */
const TAKE_CHANGE = `delete from email_changes where token_hash = ? and expires_at > now() returning user_id, new_email`;

/** Uses up the live change token hashing to `tokenHash`: its user and new address, or undefined. */
export async function takeEmailChange(em: EntityManager, tokenHash: string): Promise<{ user_id: string; new_email: string } | undefined> {
  const [row] = await query<{ user_id: string; new_email: string }>(em, TAKE_CHANGE, [tokenHash]);
  return row;
}

/** Voids the user's pending change, if any. */
export async function voidEmailChange(em: EntityManager, userId: string): Promise<void> {
  await query(em, 'delete from email_changes where user_id = ?', [userId]);
}

/**
 * Makes room for one more undo token of the user: deletes its spent and expired ones, and past
 * `keep - 1` live ones the newest, never the oldest. The oldest is the owner's way back from the
 * first change someone else made; later changes' undo links went to that someone's addresses.
 */
export async function makeRoomForEmailRevert(em: EntityManager, userId: string, keep: number): Promise<void> {
  await query(em, 'delete from email_reverts where user_id = ? and (used_at is not null or expires_at <= now())', [userId]);
  await query(
    em,
    `delete from email_reverts where token_hash in
       (select token_hash from email_reverts where user_id = ? order by created_at, token_hash offset ?)`,
    [userId, keep - 1],
  );
}

/** Records an undo token for the user that restores `oldEmail`, valid for `ttlMs` from now. */
export async function issueEmailRevert(
  em: EntityManager,
  userId: string,
  oldEmail: string,
  tokenHash: string,
  ttlMs: number,
): Promise<void> {
  await query(
    em,
    `insert into email_reverts (token_hash, user_id, old_email, created_at, expires_at, used_at)
     values (?, ?, ?, now(), now() + ?::float8 * interval '1 millisecond', null)`,
    [tokenHash, userId, oldEmail, ttlMs],
  );
}

/** One conditional update: of racing takers of one undo token, exactly one gets its user and address. */
const TAKE_REVERT = `update email_reverts set used_at = now()
  where token_hash = ? and used_at is null and expires_at > now()
  returning user_id, old_email`;

export async function takeEmailRevert(em: EntityManager, tokenHash: string): Promise<{ user_id: string; old_email: string } | undefined> {
  const [row] = await query<{ user_id: string; old_email: string }>(em, TAKE_REVERT, [tokenHash]);
  return row;
}

/** Sets the user's e-mail address: the address it replaced and the user's username, or undefined when there is no such user. */
export async function setEmail(
  em: EntityManager,
  userId: string,
  email: string,
): Promise<{ old_email: string; username: string } | undefined> {
  const [row] = await query<{ old_email: string; username: string }>(
    em,
    `update users u set email = ?, updated_at = now() from users old
     where u.id = ? and old.id = u.id returning old.email as old_email, u.username`,
    [email, userId],
  );
  return row;
}

// ---------- An account's delete (domain/account-deletion.ts; its projects are in repositories/projects-rows.ts) ----------

/** Deletes the user's row, taking its sessions and API tokens with it by the schema's cascades (activity it wrote keeps existing, its actor set to null). */
export async function deleteUserRow(tx: EntityManager, userId: string): Promise<void> {
  const credentials = [
    ...(await tx.find(Session, { user: userId }, { fields: ['id'] })),
    ...(await tx.find(ApiToken, { user: userId }, { fields: ['id'] })),
  ];
  await tx.nativeDelete(User, { id: userId });
  credentialsEnded(tx, credentials);
}
