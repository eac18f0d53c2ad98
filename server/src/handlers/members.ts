import type { Handler } from '../http/handler-types.js';
import { removeMember as remove } from '../domain/members.js';
import { authorize } from '../policies/project.js';

export const removeMember: Handler<'removeMember'> = async ({ params, caller, em, services }) => {
  const { project } = await authorize(em, caller, params.namespace, 'member.remove', params.username);
  const userId = await remove(em, caller.user, project, params.username);
  services.announce({ kind: 'member-removed', projectId: project.id, userId }); // closes its event streams at once
  return { status: 204 };
};
