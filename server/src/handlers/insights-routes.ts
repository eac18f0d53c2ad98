import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentInsight } from '../presenters/project-presenters.js';

export const createInsight: Handler<'createInsight'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'insight.create');
  return { status: 201, data: presentInsight(await services.insights.create({ em, caller }, project, body)) };
};

export const listInsights: Handler<'listInsights'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'insight.list');
  const page = pageRequest(query);
  return { status: 200, data: toPage(await services.insights.list({ em, caller }, project, page), page.limit, presentInsight) };
};

export const updateInsight: Handler<'updateInsight'> = async ({ params, body, caller, em, services }) => {
  const access = await projectAccess({ em, caller }, params.namespace, 'insight.update');
  return { status: 200, data: presentInsight(await services.insights.change({ em, caller }, access, params.insight_id, body)) };
};

export const deleteInsight: Handler<'deleteInsight'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'insight.delete');
  await services.insights.remove({ em, caller }, project, params.insight_id);
  return { status: 204 };
};
