import type { Handler } from '../http/handler-types.js';
import { listEvents as list, publishEvent as publish } from '../domain/events.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { authorize } from '../policies/project.js';
import { presentEvent } from '../presenters/project.js';

export const publishEvent: Handler<'publishEvent'> = async ({ params, body, caller, em }) => {
  const { project } = await authorize(em, caller, params.namespace, 'event.publish');
  return { status: 201, data: presentEvent(await publish(em, project, params.feed, body)) };
};

export const listEvents: Handler<'listEvents'> = async ({ params, query, caller, em }) => {
  const { project } = await authorize(em, caller, params.namespace, 'event.list');
  const page = pageRequest(query);
  const events = await list(em, project, { feed: query.feed, tag: query.tag }, page);
  return { status: 200, data: toPage(events, page.limit, presentEvent) };
};
