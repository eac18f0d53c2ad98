import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { removeFromProject } from '../domain/members.js';

export const removeMember: Handler<'removeMember'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'member.remove', params.username);
  const userId = await removeFromProject(em, services.webhookShapes, caller.user, project, params.username);
  services.announce({ kind: 'member-removed', projectId: project.id, userId }); // closes its event streams at once
  return { status: 204 };
};
