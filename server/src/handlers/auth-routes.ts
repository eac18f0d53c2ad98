import { Forbidden } from '../errors.js';
import type { Handler } from '../http/handler-types.js';
import type { Services } from '../services.js';
import { callerFromHeader, SESSION_LIFETIME_SECONDS } from '../domain/credentials.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentApiToken, presentCreatedApiToken, presentSessionGrant } from '../presenters/account-presenters.js';

export const signup: Handler<'signup'> = async ({ body, authorization, device, em, services }) => {
  if (await callerFromHeader(em, authorization)) {
    throw new Forbidden('already_authenticated', 'Sign-up is for callers without an account; this request carries a valid credential.');
  }
  const { cookie = false, ...account } = body;
  const grant = await services.accounts.signup({ em }, account, device);
  return sessionAnswer(grant, cookie, services);
};

export const login: Handler<'login'> = async ({ body, device, em, services }) => {
  const grant = await services.accounts.login({ em }, body.login, body.password, device);
  return sessionAnswer(grant, body.cookie ?? false, services);
};

/** A new session's 201: its token in the body, or with `cookie: true` in the session cookie only. */
function sessionAnswer(grant: Parameters<typeof presentSessionGrant>[0], cookie: boolean, services: Services) {
  const data = presentSessionGrant(grant, services.icons, cookie);
  return cookie
    ? { status: 201 as const, data, sessionCookie: { token: grant.token, maxAgeSeconds: SESSION_LIFETIME_SECONDS } }
    : { status: 201 as const, data };
}

/** A session that came in the cookie also has the cookie cleared. */
export const logout: Handler<'logout'> = async ({ caller, viaCookie, em, services }) => {
  await services.credentials.close({ em, caller });
  return viaCookie ? { status: 204, sessionCookie: null } : { status: 204 };
};

export const createApiToken: Handler<'createApiToken'> = async ({ body, caller, em, services }) => {
  const created = await services.credentials.mintApiToken({ em, caller }, body);
  return { status: 201, data: presentCreatedApiToken(created) };
};

export const listApiTokens: Handler<'listApiTokens'> = async ({ query, caller, em, services }) => {
  const page = pageRequest(query);
  const rows = await services.credentials.apiTokens({ em, caller }, page);
  return { status: 200, data: toPage(rows, page.limit, presentApiToken) };
};

export const deleteApiToken: Handler<'deleteApiToken'> = async ({ params, caller, em, services }) => {
  await services.credentials.revokeApiToken({ em, caller }, params.id);
  return { status: 204 };
};
