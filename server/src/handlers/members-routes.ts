import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';

export const removeMember: Handler<'removeMember'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'member.remove', params.username);
  await services.members.remove({ em, caller }, project, params.username);
  return { status: 204 };
};
