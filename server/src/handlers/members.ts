import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { removeFromProject } from '../domain/members.js';

export const removeMember: Handler<'removeMember'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'member.remove', params.username);
  await removeFromProject(em, services.webhookShapes, caller.user, project, params.username);
  return { status: 204 };
};
