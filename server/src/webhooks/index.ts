/**
 * Webhooks: the one module other folders import of server/src/webhooks/ (eslint.config.js says so).
 * Inside: the endpoints and the attempts a member asks for (webhooks-module.ts), the deliverer that
 * sends the queue (deliverer.ts), a delivery's message and request (messages.ts), one HTTP attempt
 * (send.ts) through the SSRF guard (address-guard.ts), the masking of Slack and Discord addresses
 * (url-mask.ts), the notice of an endpoint turned off (disabled-notice.ts) and the answers' shapes
 * (webhook-presenters.ts). Their SQL is in db/repositories/webhook-outbox.ts: only db/ reaches the database.
 */
export { Deliverer } from './deliverer.js';
export { onEndpointsDisabled } from './disabled-notice.js';
export {
  presentCreatedWebhook,
  presentDelivery,
  presentRotatedSecret,
  presentTestResult,
  presentWebhook,
  presentWebhookLimits,
} from './webhook-presenters.js';
export { Webhooks, type WebhooksDeps } from './webhooks-module.js';
