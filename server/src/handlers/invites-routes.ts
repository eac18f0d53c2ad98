import type { Handler } from '../http/handler-types.js';
import { inviteeAccess, projectAccess } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentInvite, presentProject, presentReceivedInvite } from '../presenters/project-presenters.js';

export const createInvite: Handler<'createInvite'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'invite.create');
  const invite = await services.members.invite({ em, caller }, project, body.username);
  return { status: 201, data: presentInvite(invite, services.icons) };
};

export const listInvites: Handler<'listInvites'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'invite.list');
  const page = pageRequest(query);
  const invites = await services.members.invitesOf({ em, caller }, project, page);
  return { status: 200, data: toPage(invites, page.limit, (invite) => presentInvite(invite, services.icons)) };
};

export const acceptInvite: Handler<'acceptInvite'> = async ({ params, caller, em, services }) => {
  const { invite } = await inviteeAccess({ em, caller }, params.namespace, 'invite.accept', params.username);
  return { status: 200, data: presentProject(await services.members.join({ em, caller }, invite), services.icons) };
};

export const deleteInvite: Handler<'deleteInvite'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'invite.delete', params.username);
  await services.members.withdraw({ em, caller }, project, params.username);
  return { status: 204 };
};

export const listReceivedInvites: Handler<'listReceivedInvites'> = async ({ query, caller, em, services }) => {
  const page = pageRequest(query);
  const invites = await services.members.received({ em, caller }, page);
  return { status: 200, data: toPage(invites, page.limit, (invite) => presentReceivedInvite(invite, services.icons)) };
};
