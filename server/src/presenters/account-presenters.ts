/**
 * Accounts and credentials on the wire. Fields are picked one by one, so a hash or a column added
 * later can never reach a response by accident.
 */
import type { components } from '../../../spec/generated/openapi.js';
import type { ApiToken, Session, User } from '../db/entities.js';
import type { IconUrls } from './project-presenters.js';

type Schemas = components['schemas'];

export function presentUser(user: User, icons: IconUrls): Schemas['User'] {
  return {
    id: user.id,
    username: user.username,
    email: user.email,
    icon: icons.url(user.icon),
    created_at: user.createdAt.toISOString(),
  };
}

/** `inCookie`: the token goes in the session cookie, so the body leaves it out. */
export function presentSessionGrant(
  grant: { user: User; session: Session; token: string },
  icons: IconUrls,
  inCookie = false,
): Schemas['SessionGrant'] {
  const shown = { expires_at: grant.session.expiresAt.toISOString(), user: presentUser(grant.user, icons) };
  return inCookie ? shown : { token: grant.token, ...shown };
}

/** A token as listed; `projects`: the namespaces of the projects it is limited to, null when it is not. */
export function presentApiToken({ apiToken, projects }: { apiToken: ApiToken; projects: string[] | null }): Schemas['ApiToken'] {
  return {
    id: apiToken.id,
    name: apiToken.name,
    created_at: apiToken.createdAt.toISOString(),
    expires_at: apiToken.expiresAt?.toISOString() ?? null,
    last_used_at: apiToken.lastUsedAt?.toISOString() ?? null,
    projects,
    scopes: apiToken.scopes,
  };
}

export function presentCreatedApiToken(created: {
  apiToken: ApiToken;
  projects: string[] | null;
  token: string;
}): Schemas['CreatedApiToken'] {
  const { last_used_at: _unused, ...listed } = presentApiToken(created);
  return { ...listed, token: created.token };
}

/** A session as its user lists it: its device record, never its token. `current`: the session of the request. */
export function presentSession(session: Session, currentSessionId: string): Schemas['Session'] {
  return {
    id: session.id,
    user_agent: session.userAgent ?? null,
    ip: session.ip ?? null,
    created_at: session.createdAt.toISOString(),
    last_used_at: session.lastUsedAt.toISOString(),
    current: session.id === currentSessionId,
  };
}
