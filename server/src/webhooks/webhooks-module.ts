/**
 * The webhooks module: a project's endpoints and the attempts a member asks for (a test, a retry
 * now, a recovery). Built once in services.ts with its settings, the caps and the deliverer; its
 * methods act within a request's `Scope` on a project the handler has checked access to. What
 * queues deliveries is with each change (the events' insert, and the insight, project and member
 * changes with their `ChangeShapes`); what sends them is the deliverer (deliverer.ts).
 */
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { v7 } from 'uuid';
import type { components } from '../../../spec/generated/openapi.js';
import type { WebhookSettings } from '../config.js';
import type { Project } from '../db/entities.js';
import { decodeCursor, type PageRequest } from '../db/page.js';
import {
  countEndpoints,
  deleteEndpoint,
  deliveryPage,
  endpointPage,
  findDelivery,
  findEndpoint,
  insertEndpoint,
  queueRecovery,
  recordManualAttempt,
  replaceSecret,
  type DeliveryRow,
  type EndpointRow,
  updateEndpoint,
  type WebhookFilter,
  type WebhookFormat,
} from '../db/repositories/webhook-outbox.js';
import { lockMembership, lockProject, transaction } from '../db/transaction.js';
import { Conflict, InvalidRequest, NotFound } from '../errors.js';
import { recordActivity } from '../domain/activity.js';
import { tagCandidates } from '../domain/events.js';
import { refuseAtCap, type Limits } from '../domain/limits.js';
import type { Scope } from '../domain/scope.js';
import { checkUrl, RefusedAddress } from './address-guard.js';
import type { Deliverer } from './deliverer.js';
import type { Message } from './messages.js';
import { delivered, logEntry, type AttemptResult } from './send.js';
import { hidesUrl, isMasked, shownUrl } from './url-mask.js';

/** `POST /v1/projects/{namespace}/webhooks`'s body. */
export type WebhookInput = components['schemas']['CreateWebhookRequest'];
/** `PATCH …/webhooks/{webhook_id}`'s body: what it leaves out is kept. */
export type WebhookChanges = components['schemas']['UpdateWebhookRequest'];

/** How long a replaced secret keeps signing beside the new one. */
const ROTATION_OVERLAP_MS = 24 * 3_600_000;

const webhookNotFound = () => new NotFound('No webhook endpoint with this id in this project.');

/** A new signing secret in the Standard Webhooks form: `whsec_` and 32 random bytes in base64. */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The URL as the endpoint keeps it, or 400 on `/body/url` saying why the rules refuse it. A masked
 * address, as the service shows a Slack or Discord one (url-mask.ts), is never taken for one.
 */
function checkedUrl(raw: string, rules: WebhookSettings): string {
  if (isMasked(raw)) {
    throw InvalidRequest.field(
      '/body/url',
      'is masked as the service shows it: send the whole address, or leave url out to keep the stored one',
    );
  }
  try {
    return checkUrl(raw, rules).href;
  } catch (error) {
    if (error instanceof RefusedAddress) throw InvalidRequest.field('/body/url', error.message);
    throw error;
  }
}

function filterOf(input: WebhookInput['filter']): WebhookFilter {
  const { types, feeds, tags, notify_only, ...unhandled } = input ?? {};
  const _everyField: Record<string, never> = unhandled;
  (tags ?? []).forEach((tag, i) => tagCandidates(tag, `/body/filter/tags/${i}`));
  return {
    types: [...new Set(types ?? [])],
    feeds: [...new Set(feeds ?? [])],
    tags: [...new Set(tags ?? [])],
    notifyOnly: notify_only ?? false,
  };
}

/** 400 for a change that would show a hidden address whole: a Slack or Discord endpoint made `standard` with no new url. */
function refuseUnmasking(from: WebhookFormat, to: WebhookFormat | undefined, url: string | undefined): void {
  if (url === undefined && to !== undefined && hidesUrl(from) && !hidesUrl(to)) {
    throw InvalidRequest.field(
      '/body/format',
      'can become standard only with a url: a Slack or Discord address is shown masked, a standard one whole',
    );
  }
}

/** The lowest event id an event stored at `at` or later can have (ids are UUID v7: their first 48 bits are the milliseconds). */
function lowestIdAt(at: Date): string {
  const ms = at.getTime().toString(16).padStart(12, '0');
  return `${ms.slice(0, 8)}-${ms.slice(8)}-0000-0000-000000000000`;
}

async function endpointOf(em: EntityManager, project: Project, id: string, forUpdate = false): Promise<EndpointRow> {
  const endpoint = await findEndpoint(em, project.id, id, forUpdate);
  if (!endpoint) throw webhookNotFound();
  return endpoint;
}

/** What the webhooks module is built with (services.ts). */
export interface WebhooksDeps {
  /** `config.webhooks`: which addresses an endpoint may have, and how attempts are made. */
  settings: WebhookSettings;
  limits: Limits;
  /** Makes the attempts a member asks for, and builds a queued delivery's message as it sends it. */
  deliverer: Deliverer;
}

/** A project's webhook endpoints and their deliveries. */
export class Webhooks {
  constructor(private readonly deps: WebhooksDeps) {}

  /** The project's endpoints, newest first (`limit + 1` for the page's `next_cursor`). */
  list({ em }: Scope, project: Project, page: PageRequest): Promise<EndpointRow[]> {
    return endpointPage(em, project.id, decodeCursor(page.cursor), page.limit + 1);
  }

  /** One of the project's endpoints. */
  get({ em }: Scope, project: Project, id: string): Promise<EndpointRow> {
    return endpointOf(em, project, id);
  }

  /**
   * Adds an endpoint with a new secret, answering to the caller: it is turned off when the caller's
   * membership ends (domain/departure.ts), which `lockMembership` keeps from slipping past a
   * concurrent departure. 409 `limit_reached` past the project's cap.
   */
  async create({ em, caller }: Scope, project: Project, input: WebhookInput): Promise<{ endpoint: EndpointRow; secret: string }> {
    const { url, description, format, filter, enabled, ...unhandled } = input;
    const _everyField: Record<string, never> = unhandled;
    const checked = checkedUrl(url, this.deps.settings);
    const secret = newSecret();
    return transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'no key update');
      await lockMembership(tx, project.id, caller.userId);
      const count = await countEndpoints(tx, project.id);
      refuseAtCap(this.deps.limits, 'webhooksPerProject', count, `This project has ${count} webhook endpoints`);
      const endpoint = await insertEndpoint(tx, {
        id: v7(),
        projectId: project.id,
        url: checked,
        description: description ?? null,
        format: format ?? 'standard',
        filter: filterOf(filter),
        enabled: enabled ?? true,
        secret,
        createdBy: caller.userId,
      });
      recordActivity(tx, {
        project,
        actor: caller.user,
        type: 'webhook.created',
        data: { webhook: endpoint.id, url: shownUrl(endpoint.url, endpoint.format) },
      });
      return { endpoint, secret };
    });
  }

  /**
   * Changes an endpoint. Enabling one the service turned off queues again, from the stored events,
   * what it missed since (`recover`), in the same transaction. Whoever gives it a new address or
   * turns it on chooses where it sends: it answers to that member from then on (its `createdBy`).
   */
  async update({ em, caller }: Scope, project: Project, id: string, changes: WebhookChanges): Promise<EndpointRow> {
    const { url, description, format, filter, enabled, ...unhandled } = changes;
    const _everyField: Record<string, never> = unhandled;
    const checked = url === undefined ? undefined : checkedUrl(url, this.deps.settings);
    return transaction(em, async (tx) => {
      await lockProject(tx, project.id, 'key share');
      await lockMembership(tx, project.id, caller.userId);
      const before = await endpointOf(tx, project, id, true);
      refuseUnmasking(before.format, format, checked);
      const redirected = (checked !== undefined && checked !== before.url) || (enabled === true && !before.enabled);
      const after = await updateEndpoint(tx, id, {
        url: checked ?? before.url,
        description: description === undefined ? before.description : description,
        format: format ?? before.format,
        filter: filter === undefined ? before.filter : filterOf(filter),
        enabled: enabled ?? before.enabled,
        createdBy: redirected ? caller.userId : (before.createdBy?.id ?? null),
      });
      // What it missed: from the first event the backlog's cap left out, or the events stored since it was turned off.
      const recovered = enabled === true && !before.enabled && before.disabledReason !== null && before.disabledAt !== null;
      if (recovered && before.missedFromEvent !== null) await queueRecovery(tx, id, new Date(0), before.missedFromEvent);
      else if (recovered) await queueRecovery(tx, id, before.disabledAt!, lowestIdAt(before.disabledAt!));
      const fields = (['url', 'description', 'format', 'enabled'] as const).filter(
        (f) => changes[f] !== undefined && changes[f] !== before[f],
      );
      if (filter !== undefined) fields.push('filter' as never);
      if (fields.length > 0) recordActivity(tx, { project, actor: caller.user, type: 'webhook.updated', data: { webhook: id, fields } });
      return recovered ? ((await findEndpoint(tx, project.id, id)) ?? after) : after;
    });
  }

  /** Deletes an endpoint, and with it its deliveries. */
  async remove({ em, caller }: Scope, project: Project, id: string): Promise<void> {
    await transaction(em, async (tx) => {
      const endpoint = await endpointOf(tx, project, id, true);
      if (!(await deleteEndpoint(tx, project.id, id))) throw webhookNotFound();
      recordActivity(tx, {
        project,
        actor: caller.user,
        type: 'webhook.deleted',
        data: { webhook: id, url: shownUrl(endpoint.url, endpoint.format) },
      });
    });
  }

  /** Gives the endpoint a new secret; the one it had signs beside it for 24 hours. */
  async rotateSecret({ em }: Scope, project: Project, id: string): Promise<{ secret: string; previousExpiresAt: Date }> {
    return transaction(em, async (tx) => {
      await endpointOf(tx, project, id, true);
      const secret = newSecret();
      const previousExpiresAt = new Date(Date.now() + ROTATION_OVERLAP_MS);
      await replaceSecret(tx, id, secret, previousExpiresAt);
      return { secret, previousExpiresAt };
    });
  }

  /** Sends a `webhook.test` now, enabled or not, and answers what came back. */
  async test({ em }: Scope, project: Project, id: string): Promise<AttemptResult> {
    const endpoint = await endpointOf(em, project, id);
    const shown = shownUrl(endpoint.url, endpoint.format);
    const message: Message = { type: 'webhook.test', data: { message: `Signalboard test delivery to ${shown}` } };
    return this.deps.deliverer.attempt(
      { id: v7(), createdAt: new Date(), url: endpoint.url, format: endpoint.format, secrets: endpoint.secrets },
      message,
    );
  }

  /** The endpoint's deliveries, newest first (`limit + 1` for the page's `next_cursor`). */
  async deliveries({ em }: Scope, project: Project, id: string, page: PageRequest): Promise<DeliveryRow[]> {
    await endpointOf(em, project, id);
    return deliveryPage(em, id, decodeCursor(page.cursor), page.limit + 1);
  }

  /**
   * Sends a delivery again now, with its own `webhook-id`, whatever its state; answers it with the
   * attempt logged. 409 `event_expired` when its event is no longer stored.
   */
  async retry({ em }: Scope, project: Project, id: string, deliveryId: string): Promise<DeliveryRow> {
    const endpoint = await endpointOf(em, project, id);
    const delivery = await findDelivery(em, id, deliveryId);
    if (!delivery) throw new NotFound('No delivery with this id for this webhook endpoint.');
    const message = (await this.deps.deliverer.messagesOf(em, [delivery])).get(delivery.id);
    if (!message)
      throw new Conflict('event_expired', "This delivery's event is no longer stored (retention or its feed's delete removed it).");
    const at = new Date().toISOString();
    const result = await this.deps.deliverer.attempt(
      { ...delivery, url: endpoint.url, format: endpoint.format, secrets: endpoint.secrets },
      message,
    );
    await recordManualAttempt(em, deliveryId, logEntry(at, result), delivered(result));
    return (await findDelivery(em, id, deliveryId)) ?? delivery;
  }

  /** Queues again the stored events since `since` that pass the endpoint's filter, as far as its backlog has room. */
  async recover({ em }: Scope, project: Project, id: string, since: Date): Promise<{ queued: number; resumeSince: Date | null }> {
    return transaction(em, async (tx) => {
      await endpointOf(tx, project, id, true);
      return queueRecovery(tx, id, since, lowestIdAt(since));
    });
  }
}
