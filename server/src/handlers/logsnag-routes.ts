/** LogSnag compatibility (spec/logsnag.tsp): the project named in the body, then the native routes' rules through the LogSnag module (domain/logsnag.ts). */
import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { presentEndUser, presentEvent, presentInsight } from '../presenters/project-presenters.js';

export const logsnagLog: Handler<'logsnagLog'> = async ({ body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, body.project, 'event.publish');
  const event = await services.logsnag.log({ em, caller }, project, body);
  return { status: 200, data: presentEvent(event) };
};

export const logsnagSetInsight: Handler<'logsnagSetInsight'> = async ({ body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, body.project, 'insight.update');
  return { status: 200, data: presentInsight(await services.logsnag.setInsight({ em, caller }, project, body)) };
};

export const logsnagIncrementInsight: Handler<'logsnagIncrementInsight'> = async ({ body, caller, em, services }) => {
  const access = await projectAccess({ em, caller }, body.project, 'insight.update');
  return { status: 200, data: presentInsight(await services.logsnag.incrementInsight({ em, caller }, access, body)) };
};

export const logsnagIdentify: Handler<'logsnagIdentify'> = async ({ body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, body.project, 'end-user.identify');
  return { status: 200, data: presentEndUser(await services.logsnag.identify({ em, caller }, project, body)) };
};
