import type { Handler } from '../http/handler-types.js';
import { removeMember as remove } from '../domain/members.js';
import { authorize } from '../policies/project.js';

export const removeMember: Handler<'removeMember'> = async ({ params, caller, em }) => {
  const { project } = await authorize(em, caller, params.namespace, 'member.remove', params.username);
  await remove(em, caller.user, project, params.username);
  return { status: 204 };
};
