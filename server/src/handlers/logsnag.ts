/** LogSnag compatibility (spec/logsnag.tsp): the project named in the body, then the native routes' rules through domain/logsnag.ts. */
import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { identifyEndUser, incrementInsight, logEvent, setInsight } from '../domain/logsnag.js';
import { presentEndUser, presentEvent, presentInsight } from '../presenters/project.js';

export const logsnagLog: Handler<'logsnagLog'> = async ({ body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, body.project, 'event.publish');
  const event = await logEvent(em, services.events, caller.user, project, body, services.config.limits);
  return { status: 200, data: presentEvent(event) };
};

export const logsnagSetInsight: Handler<'logsnagSetInsight'> = async ({ body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, body.project, 'insight.update');
  return {
    status: 200,
    data: presentInsight(await setInsight(em, caller.user, project, body, services.config.limits, services.webhookShapes)),
  };
};

export const logsnagIncrementInsight: Handler<'logsnagIncrementInsight'> = async ({ body, caller, em, services }) => {
  const access = await projectAccess(em, caller, body.project, 'insight.update');
  return {
    status: 200,
    data: presentInsight(await incrementInsight(em, caller, access, body, services.config.limits, services.webhookShapes)),
  };
};

export const logsnagIdentify: Handler<'logsnagIdentify'> = async ({ body, caller, em }) => {
  const { project } = await projectAccess(em, caller, body.project, 'end-user.identify');
  return { status: 200, data: presentEndUser(await identifyEndUser(em, project, body)) };
};
