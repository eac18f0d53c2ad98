import type { Handler } from '../http/handler-types.js';
import { projectAccess, projectView } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { changeProject, createOwnedProject, listProjectsOf, removeProject } from '../domain/projects.js';
import { handOverProject } from '../domain/members.js';
import { presentProject } from '../presenters/project.js';

export const createProject: Handler<'createProject'> = async ({ body, caller, em, services }) => {
  const project = await createOwnedProject(em, services.icons, caller.user, body, services.config.limits);
  return { status: 201, data: presentProject(project, services.icons) };
};

export const listProjects: Handler<'listProjects'> = async ({ query, caller, em, services }) => {
  const page = pageRequest(query);
  const { views, more } = await listProjectsOf(em, caller.user, caller.grant, page);
  return { status: 200, data: toPage(views, page.limit, (project) => presentProject(project, services.icons), more) };
};

export const getProject: Handler<'getProject'> = async ({ params, caller, em, services }) => {
  const view = await projectView(em, caller, params.namespace);
  return { status: 200, data: presentProject(view, services.icons) };
};

export const updateProject: Handler<'updateProject'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'project.update');
  const updated = await changeProject(em, services.icons, caller.user, project, body, services.webhookShapes);
  return { status: 200, data: presentProject(updated, services.icons) };
};

export const deleteProject: Handler<'deleteProject'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'project.delete');
  await removeProject(em, services.billing, caller.user, project);
  return { status: 204 };
};

export const transferOwnership: Handler<'transferOwnership'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'project.transfer');
  const view = await handOverProject(em, caller.user, project, body.username, services.config.limits);
  return { status: 200, data: presentProject(view, services.icons) };
};
