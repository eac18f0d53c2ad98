/**
 * Webhook endpoints: the rules of managing them, and the attempts a member asks for (a test, a
 * retry now). What queues deliveries is with each change (the events' insert, `queueChange` in the
 * domain that makes the change); what sends them is server/src/webhooks/.
 */
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { v7 } from 'uuid';
import type { components } from '../../../spec/generated/openapi.js';
import type { WebhookSettings } from '../config.js';
import type { Project, User } from '../db/entities.js';
import { unitOfWork, type Database } from '../db/orm.js';
import { decodeCursor, type PageRequest } from '../db/page.js';
import { eventsByIds } from '../db/repositories/events.js';
import {
  claimDue,
  countEndpoints,
  deleteEndpoint,
  deliveryPage,
  endpointPage,
  findDelivery,
  findEndpoint,
  insertEndpoint,
  ownerOf,
  queueRecovery,
  recordManualAttempt,
  replaceSecret,
  settle,
  vacuumDeliveries,
  type ClaimedDelivery,
  type DeliveryRow,
  type DisabledEndpoint,
  type EndpointRow,
  type Outcome,
  updateEndpoint,
  type WebhookFilter,
  type WebhookFormat,
} from '../db/repositories/webhooks.js';
import { lockMembership, lockProject, transaction } from '../db/transaction.js';
import { Conflict, InvalidRequest, NotFound } from '../errors.js';
import type { MailOutbox } from '../mail/outbox.js';
import { checkUrl, RefusedAddress } from '../webhooks/address-guard.js';
import { hidesUrl, isMasked, shownUrl } from './webhook-urls.js';
import type { Deliverer } from '../webhooks/deliverer.js';
import { messageOf, type Message } from '../webhooks/messages.js';
import { delivered, logEntry, type AttemptResult } from '../webhooks/send.js';
import { recordActivity } from './activity.js';
import { tagCandidates, type EventRow } from './events.js';
import type { InsightView } from './insights.js';
import type { ProjectView } from './projects.js';
import { refuseAtCap, type Limits } from './limits.js';

export type { ClaimedDelivery, DeliveryRow, DisabledEndpoint, EndpointRow, Outcome };
export type { WebhookFormat, WebhookType } from '../db/repositories/webhooks.js';

/** Claims due deliveries for this instance to send (the repository's `claimDue` says how). */
export const claimDueDeliveries = claimDue;

/** Writes claimed attempts' outcomes; answers the endpoints this turned off (the repository's `settle`). */
export const settleAttempts = settle;

/** Clears the dead rows settling leaves behind (the repository's `vacuumDeliveries` says why). */
export const tidyDeliveries = vacuumDeliveries;

/** The events among `ids` still stored. */
export const storedEvents = eventsByIds;

/**
 * How a change is shown in its deliveries' `data`: as the API shows it, by the presenters, which
 * the caller hands in (domain/ presents nothing itself). Shown when the change commits, so a
 * delivery says what the change made even if a later one changed it again.
 */
export interface ChangeShapes {
  member(user: Pick<User, 'id' | 'username' | 'icon'>, role: 'owner' | 'member'): unknown;
  project(view: ProjectView): unknown;
  insight(insight: InsightView): unknown;
  event(event: EventRow): unknown;
}

/** `POST /v1/projects/{namespace}/webhooks`'s body. */
export type WebhookInput = components['schemas']['CreateWebhookRequest'];
/** `PATCH …/webhooks/{webhook_id}`'s body: what it leaves out is kept. */
export type WebhookChanges = components['schemas']['UpdateWebhookRequest'];

/** How long a replaced secret keeps signing beside the new one. */
const ROTATION_OVERLAP_MS = 24 * 3_600_000;

export const webhookNotFound = () => new NotFound('No webhook endpoint with this id in this project.');

/** A new signing secret in the Standard Webhooks form: `whsec_` and 32 random bytes in base64. */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The URL as the endpoint keeps it, or 400 on `/body/url` saying why the rules refuse it. A masked
 * address, as the service shows a Slack or Discord one (webhook-urls.ts), is never taken for one.
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

async function endpointOf(em: EntityManager, project: Project, id: string, forUpdate = false): Promise<EndpointRow> {
  const endpoint = await findEndpoint(em, project.id, id, forUpdate);
  if (!endpoint) throw webhookNotFound();
  return endpoint;
}

/** The project's endpoints, newest first (`limit + 1` for the page's `next_cursor`). */
export function endpointsOf(em: EntityManager, project: Project, page: PageRequest): Promise<EndpointRow[]> {
  return endpointPage(em, project.id, decodeCursor(page.cursor), page.limit + 1);
}

/** One of the project's endpoints. */
export function endpointById(em: EntityManager, project: Project, id: string): Promise<EndpointRow> {
  return endpointOf(em, project, id);
}

/**
 * Adds an endpoint with a new secret, answering to its maker: it is turned off when the maker's
 * membership ends (departure.ts), which `lockMembership` keeps from slipping past a concurrent
 * departure. 409 `limit_reached` past the project's cap.
 */
export async function addEndpoint(
  em: EntityManager,
  actor: User,
  project: Project,
  input: WebhookInput,
  settings: WebhookSettings,
  limits: Limits,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  const { url, description, format, filter, enabled, ...unhandled } = input;
  const _everyField: Record<string, never> = unhandled;
  const checked = checkedUrl(url, settings);
  const secret = newSecret();
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'no key update');
    await lockMembership(tx, project.id, actor.id);
    const count = await countEndpoints(tx, project.id);
    refuseAtCap(limits, 'webhooksPerProject', count, `This project has ${count} webhook endpoints`);
    const endpoint = await insertEndpoint(tx, {
      id: v7(),
      projectId: project.id,
      url: checked,
      description: description ?? null,
      format: format ?? 'standard',
      filter: filterOf(filter),
      enabled: enabled ?? true,
      secret,
      createdBy: actor.id,
    });
    recordActivity(tx, project, actor, 'webhook.created', { webhook: endpoint.id, url: shownUrl(endpoint.url, endpoint.format) });
    return { endpoint, secret };
  });
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

/**
 * Changes an endpoint. Enabling one the service turned off queues again, from the stored events,
 * what it missed since (`recover`), in the same transaction. Whoever gives it a new address or
 * turns it on chooses where it sends: it answers to that member from then on (its `createdBy`).
 */
export async function editEndpoint(
  em: EntityManager,
  actor: User,
  project: Project,
  id: string,
  changes: WebhookChanges,
  settings: WebhookSettings,
): Promise<EndpointRow> {
  const { url, description, format, filter, enabled, ...unhandled } = changes;
  const _everyField: Record<string, never> = unhandled;
  const checked = url === undefined ? undefined : checkedUrl(url, settings);
  return transaction(em, async (tx) => {
    await lockProject(tx, project.id, 'key share');
    await lockMembership(tx, project.id, actor.id);
    const before = await endpointOf(tx, project, id, true);
    refuseUnmasking(before.format, format, checked);
    const redirected = (checked !== undefined && checked !== before.url) || (enabled === true && !before.enabled);
    const after = await updateEndpoint(tx, id, {
      url: checked ?? before.url,
      description: description === undefined ? before.description : description,
      format: format ?? before.format,
      filter: filter === undefined ? before.filter : filterOf(filter),
      enabled: enabled ?? before.enabled,
      createdBy: redirected ? actor.id : (before.createdBy?.id ?? null),
    });
    // What it missed: from the first event the backlog's cap left out, or the events stored since it was turned off.
    const recovered = enabled === true && !before.enabled && before.disabledReason !== null && before.disabledAt !== null;
    if (recovered && before.missedFromEvent !== null) await queueRecovery(tx, id, new Date(0), before.missedFromEvent);
    else if (recovered) await queueRecovery(tx, id, before.disabledAt!, lowestIdAt(before.disabledAt!));
    const fields = (['url', 'description', 'format', 'enabled'] as const).filter(
      (f) => changes[f] !== undefined && changes[f] !== before[f],
    );
    if (filter !== undefined) fields.push('filter' as never);
    if (fields.length > 0) recordActivity(tx, project, actor, 'webhook.updated', { webhook: id, fields });
    return recovered ? ((await findEndpoint(tx, project.id, id)) ?? after) : after;
  });
}

/** The lowest event id an event stored at `at` or later can have (ids are UUID v7: their first 48 bits are the milliseconds). */
function lowestIdAt(at: Date): string {
  const ms = at.getTime().toString(16).padStart(12, '0');
  return `${ms.slice(0, 8)}-${ms.slice(8)}-0000-0000-000000000000`;
}

/** Deletes an endpoint, and with it its deliveries. */
export async function removeEndpoint(em: EntityManager, actor: User, project: Project, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    const endpoint = await endpointOf(tx, project, id, true);
    if (!(await deleteEndpoint(tx, project.id, id))) throw webhookNotFound();
    recordActivity(tx, project, actor, 'webhook.deleted', { webhook: id, url: shownUrl(endpoint.url, endpoint.format) });
  });
}

/** Gives the endpoint a new secret; the one it had signs beside it for 24 hours. */
export async function rotateSecret(em: EntityManager, project: Project, id: string): Promise<{ secret: string; previousExpiresAt: Date }> {
  return transaction(em, async (tx) => {
    await endpointOf(tx, project, id, true);
    const secret = newSecret();
    const previousExpiresAt = new Date(Date.now() + ROTATION_OVERLAP_MS);
    await replaceSecret(tx, id, secret, previousExpiresAt);
    return { secret, previousExpiresAt };
  });
}

/** Sends a `webhook.test` now, enabled or not, and answers what came back. */
export async function testEndpoint(em: EntityManager, project: Project, id: string, deliverer: Deliverer): Promise<AttemptResult> {
  const endpoint = await endpointOf(em, project, id);
  const shown = shownUrl(endpoint.url, endpoint.format);
  const message: Message = { type: 'webhook.test', data: { message: `Signalboard test delivery to ${shown}` } };
  return deliverer.attempt(
    { id: v7(), createdAt: new Date(), url: endpoint.url, format: endpoint.format, secrets: endpoint.secrets },
    message,
  );
}

/** The endpoint's deliveries, newest first (`limit + 1` for the page's `next_cursor`). */
export async function deliveriesOf(em: EntityManager, project: Project, id: string, page: PageRequest): Promise<DeliveryRow[]> {
  await endpointOf(em, project, id);
  return deliveryPage(em, id, decodeCursor(page.cursor), page.limit + 1);
}

/**
 * Sends a delivery again now, with its own `webhook-id`, whatever its state; answers it with the
 * attempt logged. 409 `event_expired` when its event is no longer stored.
 */
export async function retryDelivery(
  em: EntityManager,
  project: Project,
  id: string,
  deliveryId: string,
  deliverer: Deliverer,
  shapes: ChangeShapes,
): Promise<DeliveryRow> {
  const endpoint = await endpointOf(em, project, id);
  const delivery = await findDelivery(em, id, deliveryId);
  if (!delivery) throw new NotFound('No delivery with this id for this webhook endpoint.');
  const [event] = delivery.eventId === null ? [] : await eventsByIds(em, [delivery.eventId]);
  const message = messageOf(delivery, event, shapes);
  if (!message)
    throw new Conflict('event_expired', "This delivery's event is no longer stored (retention or its feed's delete removed it).");
  const at = new Date().toISOString();
  const result = await deliverer.attempt({ ...delivery, url: endpoint.url, format: endpoint.format, secrets: endpoint.secrets }, message);
  await recordManualAttempt(em, deliveryId, logEntry(at, result), delivered(result));
  return (await findDelivery(em, id, deliveryId)) ?? delivery;
}

/** Queues again the stored events since `since` that pass the endpoint's filter, as far as its backlog has room. */
export async function recoverEndpoint(
  em: EntityManager,
  project: Project,
  id: string,
  since: Date,
): Promise<{ queued: number; resumeSince: Date | null }> {
  return transaction(em, async (tx) => {
    await endpointOf(tx, project, id, true);
    return queueRecovery(tx, id, since, lowestIdAt(since));
  });
}

/**
 * What follows when the service turns endpoints off (deliverer.ts), once the statement that did it
 * has written their activity entries: a log line, and a mail to the project's owner when mail is
 * configured. Never throws: the endpoints are off whatever becomes of the notice.
 */
export function onEndpointsDisabled(db: Pick<Database, 'orm'>, outbox: MailOutbox, logger: Logger) {
  const reasons = {
    gone: 'it answered 410 Gone',
    failing: 'every delivery to it failed for 3 days',
  } as const;
  return async (endpoints: DisabledEndpoint[]): Promise<void> => {
    for (const endpoint of endpoints) {
      try {
        const owner = await ownerOf(unitOfWork(db.orm), endpoint.projectId);
        logger.info({ webhook: endpoint.id, reason: endpoint.reason }, 'webhook endpoint turned off');
        if (!owner) continue;
        outbox.post('webhook disabled', (mailer) =>
          mailer.send({
            to: owner.email,
            subject: `Signalboard turned off a webhook endpoint of ${owner.namespace}`,
            text:
              `The webhook endpoint ${endpoint.url} of the project ${owner.namespace} was turned off because ${reasons[endpoint.reason]}.\n\n` +
              'No more deliveries are sent to it. Once it works again, enable it in the console or with PATCH ' +
              `/v1/projects/${owner.namespace}/webhooks/${endpoint.id} {"enabled": true}: what it missed since is queued again.\n`,
          }),
        );
      } catch (error) {
        logger.warn({ err: { type: (error as Error).name }, webhook: endpoint.id }, 'webhook turned off; its notice failed');
      }
    }
  };
}
