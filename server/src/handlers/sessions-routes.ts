import type { Handler } from '../http/handler-types.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentSession } from '../presenters/account-presenters.js';

export const listSessions: Handler<'listSessions'> = async ({ query, caller, em, services }) => {
  const page = pageRequest(query);
  const rows = await services.credentials.sessions({ em, caller }, page);
  return { status: 200, data: toPage(rows, page.limit, (session) => presentSession(session, caller.credentialId)) };
};

export const deleteSession: Handler<'deleteSession'> = async ({ params, caller, em, services }) => {
  await services.credentials.endSession({ em, caller }, params.id);
  return { status: 204 };
};
