/** Webhook endpoints and their deliveries, on the wire. A secret is shown only where an operation makes one. */
import type { components } from '../../../spec/generated/openapi.js';
import type { WebhookSettings } from '../config.js';
import { MAX_PENDING, type DeliveryRow, type EndpointRow } from '../db/repositories/webhook-outbox.js';
import { presentMember, type IconUrls } from '../presenters/project-presenters.js';
import type { AttemptResult } from './send.js';
import { shownUrl } from './url-mask.js';

type Schemas = components['schemas'];

/** The limits `GET /v1` says, from the operator's settings and the queue's fixed room. */
export function presentWebhookLimits(settings: WebhookSettings): Schemas['WebhookLimits'] {
  return { disable_after_seconds: Math.round(settings.disableAfterMs / 1000), max_pending_deliveries: MAX_PENDING };
}

export function presentWebhook(endpoint: EndpointRow, icons: IconUrls): Schemas['WebhookEndpoint'] {
  const { types, feeds, tags, notifyOnly } = endpoint.filter;
  return {
    id: endpoint.id,
    url: shownUrl(endpoint.url, endpoint.format),
    description: endpoint.description,
    format: endpoint.format,
    filter: { types, feeds, tags, notify_only: notifyOnly },
    enabled: endpoint.enabled,
    disabled_reason: endpoint.disabledReason,
    created_by: endpoint.createdBy ? presentMember(endpoint.createdBy, icons) : null,
    pending_deliveries: endpoint.pending,
    created_at: endpoint.createdAt.toISOString(),
  };
}

export function presentCreatedWebhook(
  { endpoint, secret }: { endpoint: EndpointRow; secret: string },
  icons: IconUrls,
): Schemas['CreatedWebhookEndpoint'] {
  // The one answer that shows a Slack or Discord address whole (url-mask.ts).
  return { ...presentWebhook(endpoint, icons), url: endpoint.url, secret };
}

export function presentRotatedSecret({
  secret,
  previousExpiresAt,
}: {
  secret: string;
  previousExpiresAt: Date;
}): Schemas['RotatedWebhookSecret'] {
  return { secret, previous_expires_at: previousExpiresAt.toISOString() };
}

export function presentDelivery(delivery: DeliveryRow): Schemas['WebhookDelivery'] {
  return {
    id: delivery.id,
    type: delivery.type,
    state: delivery.state,
    next_attempt_at: delivery.nextAttemptAt?.toISOString() ?? null,
    attempts: delivery.log.map(({ at, status_code, duration_ms, body, error }) => ({ at, status_code, duration_ms, body, error })),
    created_at: delivery.createdAt.toISOString(),
  };
}

export function presentTestResult(result: AttemptResult): Schemas['WebhookTestResult'] {
  return { status_code: result.statusCode, body: result.body, duration_ms: result.durationMs, error: result.error };
}
