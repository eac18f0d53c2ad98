import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { addInsight, changeInsight, insightsOf, removeInsight } from '../domain/insights.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentInsight } from '../presenters/project.js';

export const createInsight: Handler<'createInsight'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'insight.create');
  return { status: 201, data: presentInsight(await addInsight(em, caller.user, project, body, services.config.limits)) };
};

export const listInsights: Handler<'listInsights'> = async ({ params, query, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'insight.list');
  const page = pageRequest(query);
  return { status: 200, data: toPage(await insightsOf(em, project, page), page.limit, presentInsight) };
};

export const updateInsight: Handler<'updateInsight'> = async ({ params, body, caller, em, services }) => {
  const access = await projectAccess(em, caller, params.namespace, 'insight.update');
  return { status: 200, data: presentInsight(await changeInsight(em, caller, access, params.insight_id, body, services.webhookShapes)) };
};

export const deleteInsight: Handler<'deleteInsight'> = async ({ params, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'insight.delete');
  await removeInsight(em, caller.user, project, params.insight_id);
  return { status: 204 };
};
