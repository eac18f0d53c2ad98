import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import {
  addEndpoint,
  deliveriesOf,
  editEndpoint,
  endpointById,
  endpointsOf,
  recoverEndpoint,
  removeEndpoint,
  retryDelivery,
  rotateSecret,
  testEndpoint,
} from '../domain/webhooks.js';
import { presentCreatedWebhook, presentDelivery, presentRotatedSecret, presentTestResult, presentWebhook } from '../presenters/webhooks.js';

export const listWebhooks: Handler<'listWebhooks'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.list');
  const page = pageRequest(query);
  return {
    status: 200,
    data: toPage(await endpointsOf(em, project, page), page.limit, (endpoint) => presentWebhook(endpoint, services.icons)),
  };
};

export const createWebhook: Handler<'createWebhook'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.create');
  const created = await addEndpoint(em, caller.user, project, body, services.config.webhooks, services.config.limits);
  return { status: 201, data: presentCreatedWebhook(created, services.icons) };
};

export const getWebhook: Handler<'getWebhook'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.read');
  return { status: 200, data: presentWebhook(await endpointById(em, project, params.webhook_id), services.icons) };
};

export const updateWebhook: Handler<'updateWebhook'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.update');
  const endpoint = await editEndpoint(em, caller.user, project, params.webhook_id, body, services.config.webhooks);
  return { status: 200, data: presentWebhook(endpoint, services.icons) };
};

export const deleteWebhook: Handler<'deleteWebhook'> = async ({ params, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.delete');
  await removeEndpoint(em, caller.user, project, params.webhook_id);
  return { status: 204 };
};

export const rotateWebhookSecret: Handler<'rotateWebhookSecret'> = async ({ params, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.update');
  return { status: 200, data: presentRotatedSecret(await rotateSecret(em, project, params.webhook_id)) };
};

export const testWebhook: Handler<'testWebhook'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.test');
  return { status: 200, data: presentTestResult(await testEndpoint(em, project, params.webhook_id, services.webhooks)) };
};

export const listWebhookDeliveries: Handler<'listWebhookDeliveries'> = async ({ params, query, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.read');
  const page = pageRequest(query);
  return { status: 200, data: toPage(await deliveriesOf(em, project, params.webhook_id, page), page.limit, presentDelivery) };
};

export const retryWebhookDelivery: Handler<'retryWebhookDelivery'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.test');
  const delivery = await retryDelivery(em, project, params.webhook_id, params.delivery_id, services.webhooks, services.webhookShapes);
  return { status: 200, data: presentDelivery(delivery) };
};

export const recoverWebhook: Handler<'recoverWebhook'> = async ({ params, body, caller, em }) => {
  const { project } = await projectAccess(em, caller, params.namespace, 'webhook.update');
  const { queued, resumeSince } = await recoverEndpoint(em, project, params.webhook_id, new Date(body.since));
  return { status: 200, data: { queued, resume_since: resumeSince?.toISOString() ?? null } };
};
