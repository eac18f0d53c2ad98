import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { createFeed as create, deleteFeed as remove, listFeeds as list, updateFeed as update } from '../domain/feeds.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentFeed } from '../presenters/project.js';

export const listFeeds: Handler<'listFeeds'> = async ({ params, query, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'feed.list');
  const page = pageRequest(query);
  return { status: 200, data: toPage(await list(em, project, page), page.limit, presentFeed) };
};

export const createFeed: Handler<'createFeed'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'feed.create');
  return { status: 201, data: presentFeed(await create(em, caller.user, project, body, services.config.limits)) };
};

export const updateFeed: Handler<'updateFeed'> = async ({ params, body, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'feed.update');
  return { status: 200, data: presentFeed(await update(em, caller.user, project, params.feed, body)) };
};

export const deleteFeed: Handler<'deleteFeed'> = async ({ params, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'feed.delete');
  await remove(em, caller.user, project, params.feed);
  return { status: 204 };
};
