import type { Handler } from '../http/handler-types.js';
import { listActivity as list } from '../domain/activity.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { authorize } from '../policies/project.js';
import { presentActivity } from '../presenters/project.js';

export const listActivity: Handler<'listActivity'> = async ({ params, query, caller, em, services }) => {
  const { projectId } = await authorize(em, caller, params.namespace, 'activity.list');
  const page = pageRequest(query);
  return { status: 200, data: toPage(await list(em, projectId, page), page.limit, (entry) => presentActivity(entry, services.icons)) };
};
