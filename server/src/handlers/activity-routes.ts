import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentActivity } from '../presenters/project-presenters.js';

export const listActivity: Handler<'listActivity'> = async ({ params, query, caller, em, services }) => {
  const { projectId } = await projectAccess({ em, caller }, params.namespace, 'activity.list');
  const page = pageRequest(query);
  return {
    status: 200,
    data: toPage(await services.activity.list({ em, caller }, projectId, page), page.limit, (entry) =>
      presentActivity(entry, services.icons),
    ),
  };
};
