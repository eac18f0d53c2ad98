import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { feedNamed } from '../domain/feeds.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentEvent, presentEventCounts } from '../presenters/project-presenters.js';

export const publishEvent: Handler<'publishEvent'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'event.publish');
  const event = await services.events.publish({ em, caller }, project, params.feed, body);
  return { status: 201, data: presentEvent(event) };
};

export const publishEvents: Handler<'publishEvents'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'event.publish');
  const events = await services.events.publishMany({ em, caller }, project, body.events);
  return { status: 201, data: { items: events.map(presentEvent) } };
};

export const listEvents: Handler<'listEvents'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'event.list');
  const page = pageRequest(query);
  const events = await services.events.list({ em, caller }, project, query, page);
  return { status: 200, data: toPage(events, page.limit, presentEvent) };
};

export const countEvents: Handler<'countEvents'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'event.count');
  return { status: 200, data: presentEventCounts(await services.events.count({ em, caller }, project, query)) };
};

/** `feed` is resolved to its id once, before the stream opens: an unknown name is the 404 every feed route answers. */
export const streamEvents: Handler<'streamEvents'> = async ({ params, query, headers, caller, em, services }) => {
  const { projectId } = await projectAccess({ em, caller }, params.namespace, 'event.stream');
  const feedId = query.feed === undefined ? undefined : (await feedNamed(em, projectId, query.feed)).id;
  const viewer = { projectId, userId: caller.userId, credentialId: caller.credentialId, credentialKind: caller.kind };
  return { status: 200, stream: await services.live.open(viewer, headers['Last-Event-ID'], feedId) };
};
