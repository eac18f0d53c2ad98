import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentFeed } from '../presenters/project-presenters.js';

export const listFeeds: Handler<'listFeeds'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'feed.list');
  const page = pageRequest(query);
  return { status: 200, data: toPage(await services.feeds.list({ em, caller }, project, page), page.limit, presentFeed) };
};

export const createFeed: Handler<'createFeed'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'feed.create');
  return { status: 201, data: presentFeed(await services.feeds.create({ em, caller }, project, body)) };
};

export const updateFeed: Handler<'updateFeed'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'feed.update');
  return { status: 200, data: presentFeed(await services.feeds.edit({ em, caller }, project, params.feed, body)) };
};

export const deleteFeed: Handler<'deleteFeed'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'feed.delete');
  await services.feeds.remove({ em, caller }, project, params.feed);
  return { status: 204 };
};
