import type { Handler } from '../http/handler-types.js';
import { endSession, sessionsOf } from '../domain/credentials.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentSession } from '../presenters/account.js';

export const listSessions: Handler<'listSessions'> = async ({ query, caller, em }) => {
  const page = pageRequest(query);
  const rows = await sessionsOf(em, caller.user, page);
  return { status: 200, data: toPage(rows, page.limit, (session) => presentSession(session, caller.credentialId)) };
};

export const deleteSession: Handler<'deleteSession'> = async ({ params, caller, em }) => {
  await endSession(em, caller.user, params.id);
  return { status: 204 };
};
