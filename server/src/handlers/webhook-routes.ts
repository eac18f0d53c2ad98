import type { Handler } from '../http/handler-types.js';
import { projectAccess } from '../domain/access.js';
import { pageRequest, toPage } from '../domain/pagination.js';
import { presentCreatedWebhook, presentDelivery, presentRotatedSecret, presentTestResult, presentWebhook } from '../webhooks/index.js';

export const listWebhooks: Handler<'listWebhooks'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.list');
  const page = pageRequest(query);
  const endpoints = await services.webhooks.list({ em, caller }, project, page);
  return { status: 200, data: toPage(endpoints, page.limit, (endpoint) => presentWebhook(endpoint, services.icons)) };
};

export const createWebhook: Handler<'createWebhook'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.create');
  return { status: 201, data: presentCreatedWebhook(await services.webhooks.create({ em, caller }, project, body), services.icons) };
};

export const getWebhook: Handler<'getWebhook'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.read');
  return { status: 200, data: presentWebhook(await services.webhooks.get({ em, caller }, project, params.webhook_id), services.icons) };
};

export const updateWebhook: Handler<'updateWebhook'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.update');
  return {
    status: 200,
    data: presentWebhook(await services.webhooks.update({ em, caller }, project, params.webhook_id, body), services.icons),
  };
};

export const deleteWebhook: Handler<'deleteWebhook'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.delete');
  await services.webhooks.remove({ em, caller }, project, params.webhook_id);
  return { status: 204 };
};

export const rotateWebhookSecret: Handler<'rotateWebhookSecret'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.update');
  return { status: 200, data: presentRotatedSecret(await services.webhooks.rotateSecret({ em, caller }, project, params.webhook_id)) };
};

export const testWebhook: Handler<'testWebhook'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.test');
  return { status: 200, data: presentTestResult(await services.webhooks.test({ em, caller }, project, params.webhook_id)) };
};

export const listWebhookDeliveries: Handler<'listWebhookDeliveries'> = async ({ params, query, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.read');
  const page = pageRequest(query);
  return {
    status: 200,
    data: toPage(await services.webhooks.deliveries({ em, caller }, project, params.webhook_id, page), page.limit, presentDelivery),
  };
};

export const retryWebhookDelivery: Handler<'retryWebhookDelivery'> = async ({ params, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.test');
  return {
    status: 200,
    data: presentDelivery(await services.webhooks.retry({ em, caller }, project, params.webhook_id, params.delivery_id)),
  };
};

export const recoverWebhook: Handler<'recoverWebhook'> = async ({ params, body, caller, em, services }) => {
  const { project } = await projectAccess({ em, caller }, params.namespace, 'webhook.update');
  const { queued, resumeSince } = await services.webhooks.recover({ em, caller }, project, params.webhook_id, new Date(body.since));
  return { status: 200, data: { queued, resume_since: resumeSince?.toISOString() ?? null } };
};
