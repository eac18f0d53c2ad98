import type { Handler } from '../http/handler-types.js';
import { projectAccess, projectView } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentProject } from '../presenters/project-presenters.js';

export const createProject: Handler<'createProject'> = async ({ body, caller, em, services }) => {
  const project = await services.projects.create({ em, caller }, body);
  return { status: 201, data: presentProject(project, services.icons) };
};

export const listProjects: Handler<'listProjects'> = async ({ query, caller, em, services }) => {
  const page = pageRequest(query);
  const { views, more } = await services.projects.list({ em, caller }, page);
  return { status: 200, data: toPage(views, page.limit, (project) => presentProject(project, services.icons), more) };
};

export const getProject: Handler<'getProject'> = async ({ params, caller, em, services }) => {
  const view = await projectView({ em, caller }, params.namespace);
  return { status: 200, data: presentProject(view, services.icons) };
};

export const updateProject: Handler<'updateProject'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'project.update');
  const updated = await services.projects.change({ em, caller }, project, body);
  return { status: 200, data: presentProject(updated, services.icons) };
};

export const deleteProject: Handler<'deleteProject'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'project.delete');
  await services.projects.remove({ em, caller }, project);
  return { status: 204 };
};

export const transferOwnership: Handler<'transferOwnership'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'project.transfer');
  const view = await services.members.handOver({ em, caller }, project, body.username);
  return { status: 200, data: presentProject(view, services.icons) };
};
