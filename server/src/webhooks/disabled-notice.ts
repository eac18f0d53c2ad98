/**
 * What follows when the service turns endpoints off (the deliverer's `OnDisabled`), once the
 * statement that did it has written their activity entries: a log line, and a mail to the project's
 * owner when mail is configured. The mail says why in the operator's own terms: the failing period
 * is `WEBHOOK_DISABLE_AFTER` as configured. It names the endpoint as members are shown it (url-mask.ts):
 * a Slack or Discord address is a secret, and mail is no place for one.
 */
import type { Logger } from 'pino';
import type { WebhookSettings } from '../config.js';
import { unitOfWork, type Database } from '../db/orm.js';
import { ownerOf, type DisabledEndpoint } from '../db/repositories/webhook-outbox.js';
import type { MailOutbox } from '../mail/outbox.js';
import { shownUrl } from './url-mask.js';

const UNITS = [
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1_000],
  ['millisecond', 1],
] as const;

/** `ms` in the largest unit that counts it whole: `3 days`, `36 hours`, `1 second`, `1500 milliseconds`. */
export function spelledDuration(ms: number): string {
  // Every whole number of milliseconds is counted by the last unit.
  const [unit, size] = UNITS.find(([, size]) => ms % size === 0)!;
  const count = ms / size;
  return `${count} ${unit}${count === 1 ? '' : 's'}`;
}

/** The notice of endpoints turned off. Never throws: the endpoints are off whatever becomes of it. */
export function onEndpointsDisabled(
  db: Pick<Database, 'orm'>,
  outbox: MailOutbox,
  logger: Logger,
  settings: Pick<WebhookSettings, 'disableAfterMs'>,
) {
  const reasons = {
    gone: 'it answered 410 Gone',
    failing: `every delivery to it failed for ${spelledDuration(settings.disableAfterMs)}`,
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
              `The webhook endpoint ${shownUrl(endpoint.url, endpoint.format)} of the project ${owner.namespace} was turned off because ${reasons[endpoint.reason]}.\n\n` +
              'No more deliveries are sent to it. Once it works again, enable it in the console or with PATCH ' +
              `/v1/projects/${owner.namespace}/webhooks/${endpoint.id} {"enabled": true}: what it missed since is queued again.\n`,
          }),
        );
      } catch (error) {
        logger.warn({ err: error, webhook: endpoint.id }, 'webhook turned off; its notice failed');
      }
    }
  };
}
