import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { presentEndUser } from '../presenters/project-presenters.js';

export const identifyEndUser: Handler<'identifyEndUser'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'end-user.identify');
  return { status: 200, data: presentEndUser(await services.endUsers.record({ em, caller }, project, params.user_id, body)) };
};

export const getEndUser: Handler<'getEndUser'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'end-user.read');
  return { status: 200, data: presentEndUser(await services.endUsers.get({ em, caller }, project, params.user_id)) };
};
