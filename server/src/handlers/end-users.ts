import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { endUserOf, recordEndUserProperties } from '../domain/end-users.js';
import { presentEndUser } from '../presenters/project.js';

export const identifyEndUser: Handler<'identifyEndUser'> = async ({ params, body, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'end-user.identify');
  return { status: 200, data: presentEndUser(await recordEndUserProperties(em, project, params.user_id, body)) };
};

export const getEndUser: Handler<'getEndUser'> = async ({ params, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'end-user.read');
  return { status: 200, data: presentEndUser(await endUserOf(em, project, params.user_id)) };
};
