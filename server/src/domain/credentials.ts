/**
 * Session and API tokens: minting, resolving a presented token to its caller, and revoking.
 * A token is a kind prefix plus 256 random bits; only its SHA-256 is stored, so a database leak
 * yields no usable credential, and the prefix lets secret scanners recognise a leaked one.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../../spec/generated/openapi.js';
import type { ApiToken, Session, User } from '../db/entities.js';
import type { PageRequest } from '../db/page.js';
import {
  apiTokenPage,
  countApiTokens,
  credentialUser,
  deleteApiToken,
  deleteSession,
  findCredential,
  insertApiToken,
  insertSession,
  sessionPage,
  tokenProjectNamespaces,
  touchApiToken,
  touchSession,
  type CredentialKind,
  type CredentialRow,
} from '../db/repositories/accounts-rows.js';
import { memberProjectIds } from '../db/repositories/projects-rows.js';
import { lockUser, ownTransaction, transaction } from '../db/transaction.js';
import { InvalidRequest, NotFound, Unauthenticated, type ErrorDetail } from '../errors.js';
import { isScopeSet, UNLIMITED, type Grant, type TokenScope } from '../policies/project.js';
import { refuseAtCap, type Limits } from './limits.js';
import type { Caller, Scope } from './scope.js';

const SESSION_IDLE_DAYS = 30;
const DAY_MS = 24 * 60 * 60 * 1000;
/** A new session's lifetime: what the session cookie's `Max-Age` says. */
export const SESSION_LIFETIME_SECONDS = (SESSION_IDLE_DAYS * DAY_MS) / 1000;
/** Last-use times are written at most this often per credential, so reads stay reads. */
const TOUCH_INTERVAL_MS = 60 * 1000;

export type { CredentialKind };

export interface Device {
  userAgent: string | undefined;
  ip: string | undefined;
}

const PREFIX: Record<CredentialKind, string> = { session: 'ses_', api: 'api_' };

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** A new secret: `prefix` and 256 random bits, and the hash that is stored instead of it. */
export function mintSecret(prefix: string): { token: string; tokenHash: string } {
  const token = prefix + randomBytes(32).toString('base64url');
  return { token, tokenHash: hashSecret(token) };
}

function mintToken(kind: CredentialKind): { token: string; tokenHash: string } {
  return mintSecret(PREFIX[kind]);
}

/** Opens a session of the user from `device`, written at once: the session and its token, shown once. */
export async function openSession(em: EntityManager, user: User, device: Device): Promise<{ session: Session; token: string }> {
  const { token, tokenHash } = mintToken('session');
  const now = new Date();
  const session = await insertSession(em, user, {
    tokenHash,
    userAgent: device.userAgent?.slice(0, 512) ?? null,
    ip: device.ip ?? null,
    createdAt: now,
    lastUsedAt: now,
    expiresAt: new Date(now.getTime() + SESSION_IDLE_DAYS * DAY_MS),
  });
  return { session, token };
}

/**
 * The caller a token stands for, or undefined when it is unknown, expired or revoked. Runs on every
 * authenticated request: one statement (the credential joined with its user), plus a record of the
 * use at most once a minute.
 */
export async function resolveToken(em: EntityManager, token: string): Promise<Caller | undefined> {
  const kind = (Object.keys(PREFIX) as CredentialKind[]).find((k) => token.startsWith(PREFIX[k]));
  if (!kind) return undefined;
  const now = new Date();
  const row = await findCredential(em, kind, hashSecret(token));
  if (!row) return undefined;

  if (now.getTime() - (row.last_used_at === null ? 0 : new Date(row.last_used_at).getTime()) > TOUCH_INTERVAL_MS) {
    if (kind === 'session') await touchSession(em, row.credential_id, now, new Date(now.getTime() + SESSION_IDLE_DAYS * DAY_MS));
    else await touchApiToken(em, row.credential_id, now);
  }
  return new ResolvedCaller(em, row, kind);
}

/** `Authorization: Bearer <token>` or `Token <token>`, the scheme word in any case. */
const AUTHORIZATION = /^(?:Bearer|Token) +([A-Za-z0-9_-]{1,200})$/i;

/** The caller a well-formed `Authorization` header's token stands for; undefined for no header, a malformed one, or a token of nobody. */
export async function resolveAuthorization(em: EntityManager, header: string | undefined): Promise<Caller | undefined> {
  const token = header ? AUTHORIZATION.exec(header.trim())?.[1] : undefined;
  return token ? resolveToken(em, token) : undefined;
}

/** The caller behind an `Authorization` header: undefined when absent, 401 when present but not valid. */
export async function callerFromHeader(em: EntityManager, header: string | undefined): Promise<Caller | undefined> {
  if (header === undefined || header === '') return undefined;
  const caller = await resolveAuthorization(em, header);
  if (!caller) throw new Unauthenticated();
  return caller;
}

/**
 * A class, so that the lazy `user` is a getter on its prototype. A getter in an object literal made
 * per request gives each object a hidden class of its own in V8, and that class (old space) keeps
 * the getter's closure, and all it reaches, through every young-generation collection: the
 * request's objects get promoted, and a project read would spend a tenth of its time in garbage
 * collection (docs/performance-journal.md has the figures).
 */
class ResolvedCaller implements Caller {
  readonly userId: string;
  readonly username: string;
  readonly credentialId: string;
  readonly grant: Grant;
  #user: User | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly row: CredentialRow,
    readonly kind: CredentialKind,
  ) {
    this.userId = row.u__id;
    this.username = row.u__username;
    this.credentialId = row.credential_id;
    this.grant = kind === 'api' ? tokenGrant(row) : UNLIMITED;
  }

  get user(): User {
    return (this.#user ??= credentialUser(this.em, this.row));
  }
}

/** An API token's row as its grant; one made with neither `projects` nor `scopes` shares `UNLIMITED`. */
function tokenGrant(row: CredentialRow): Grant {
  const scopes = row.scopes ?? UNLIMITED.scopes;
  const limited = row.project_ids !== null && row.project_ids !== undefined;
  if (!limited && scopes.length === 1 && scopes[0] === 'all') return UNLIMITED;
  return { scopes, projectIds: limited ? new Set(row.project_ids) : undefined };
}

/** An API token with the namespaces, as they are now, of the projects it is limited to (null: not limited). */
export interface ApiTokenView {
  id: string;
  apiToken: ApiToken;
  projects: string[] | null;
}

/** What a new API token is made with, as the contract has it. */
export type ApiTokenRequest = components['schemas']['CreateApiTokenRequest'];

function noFieldLeft(_rest: Record<string, never>): void {}

/** The ids of the projects `namespaces` names, each one the user is a member of; 400 pointing at each that is not. */
async function projectsOfMember(tx: EntityManager, userId: string, namespaces: string[]): Promise<string[]> {
  const ids = await memberProjectIds(tx, userId, namespaces);
  const refused: ErrorDetail[] = namespaces.flatMap((namespace, i) =>
    ids.has(namespace) ? [] : [{ path: `/body/projects/${i}`, message: 'is not a project you are a member of' }],
  );
  if (refused.length > 0) {
    const [first] = refused;
    const more = refused.length > 1 ? ` (and ${refused.length - 1} more, see details)` : '';
    throw new InvalidRequest(`Invalid request: ${first!.path} ${first!.message}${more}.`, refused.slice(0, 20));
  }
  return [...ids.values()];
}

/** The caller's own credentials: its sessions and API tokens, listed and ended. The cap on API tokens comes with the module. */
export class Credentials {
  constructor(private readonly deps: { limits: Limits }) {}

  /** Logout: ends the caller's session. The session row is also its device record, so deleting it forgets both. */
  async close({ em, caller }: Scope): Promise<void> {
    await ownTransaction(em, (tx) => deleteSession(tx, caller.credentialId));
  }

  /**
   * Mints an API token of the caller; 409 `limit_reached` when the user has as many as it may (expired ones count
   * until revoked). The user's row is locked while its tokens are counted, so concurrent mints pass
   * the cap one at a time. A token limited to projects is limited to projects the user is a member
   * of now: any other namespace, known or not, is 400 pointing at it, alike, and nothing is made.
   */
  async mintApiToken({ em, caller }: Scope, request: ApiTokenRequest): Promise<ApiTokenView & { token: string }> {
    const user = caller.user;
    // Every field of the contract's body, so that one it adds does not compile until it is handled here.
    const { name, expires_in_days: expiresInDays, projects, scopes: askedScopes, ...rest } = request;
    noFieldLeft(rest);
    const scopes: TokenScope[] = [...(askedScopes ?? UNLIMITED.scopes)].sort();
    if (!isScopeSet(scopes)) throw InvalidRequest.field('/body/scopes', 'must be ["all"] alone, or scopes other than all');
    return transaction(em, async (tx) => {
      await lockUser(tx, user.id);
      const projectIds = projects && (await projectsOfMember(tx, user.id, projects));
      const tokens = await countApiTokens(tx, user.id);
      refuseAtCap(this.deps.limits, 'apiTokensPerUser', tokens, `You have ${tokens} API tokens`);
      const { token, tokenHash } = mintToken('api');
      const now = new Date();
      const apiToken = await insertApiToken(
        tx,
        user,
        { name, tokenHash, createdAt: now, expiresAt: expiresInDays ? new Date(now.getTime() + expiresInDays * DAY_MS) : null, scopes },
        projectIds,
      );
      return { id: apiToken.id, apiToken, token, projects: projects ? [...projects].sort() : null };
    });
  }

  /** The caller's API tokens, newest first, with the projects they are limited to. */
  async apiTokens({ em, caller }: Scope, page: PageRequest): Promise<ApiTokenView[]> {
    const tokens = await apiTokenPage(em, caller.userId, page);
    const limited = tokens.filter((apiToken) => apiToken.limitedToProjects).map((apiToken) => apiToken.id);
    const namespaces = await tokenProjectNamespaces(em, caller.userId, limited);
    return tokens.map((apiToken) => ({
      id: apiToken.id,
      apiToken,
      projects: apiToken.limitedToProjects ? (namespaces.get(apiToken.id) ?? []) : null,
    }));
  }

  /** Revokes one of the caller's API tokens; 404 for another user's or an unknown id. */
  async revokeApiToken({ em, caller }: Scope, id: string): Promise<void> {
    if (!(await ownTransaction(em, (tx) => deleteApiToken(tx, caller.userId, id)))) throw new NotFound('No API token with this id.');
  }

  /** The caller's sessions that have not expired, newest first. */
  sessions({ em, caller }: Scope, page: PageRequest): Promise<Session[]> {
    return sessionPage(em, caller.userId, page);
  }

  /** Ends one of the caller's sessions, deleting it with its device record; 404 for another user's or an unknown id. */
  async endSession({ em, caller }: Scope, id: string): Promise<void> {
    if (!(await ownTransaction(em, (tx) => deleteSession(tx, id, caller.userId)))) throw new NotFound('No session with this id.');
  }
}
