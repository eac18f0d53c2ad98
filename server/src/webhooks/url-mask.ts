/**
 * A `slack` or `discord` endpoint's address is itself a secret: whoever has it can post to the
 * channel, with no signature to check. So it is shown whole once, in the answer that creates the
 * endpoint, and everywhere else (the list, one endpoint, a change's answer, the activity, the test
 * message, the mail that says it was turned off) masked: the scheme, host and port, then the first
 * segments of the path, at most `KEPT_SEGMENTS` and never the last non-empty one, then `MASK`; no
 * query or fragment. Slack's `/services/T…/B…/<secret>` keeps its team and app ids, Discord's
 * `/api/webhooks/<id>/<token>` its webhook's id. A `standard` endpoint's address is no secret (its
 * signing secret is) and is shown whole.
 *
 * The masked form is never an address: a URL holding the mask's character is refused (400), so one
 * sent back as it was shown can neither replace the stored address nor be made an endpoint.
 */
import type { WebhookFormat } from '../db/repositories/webhook-outbox.js';

/** What stands for the hidden part. */
const MASK = '••••';
/** The mask's character, as a URL parser writes it in a path. */
const MASK_ENCODED = /%E2%80%A2/i;
/** Path segments shown at most: enough for Slack's `/services/T…/B…/` and Discord's `/api/webhooks/<id>/`. */
const KEPT_SEGMENTS = 3;

/** Whether an endpoint of `format` keeps its address secret. */
export function hidesUrl(format: WebhookFormat): boolean {
  return format === 'slack' || format === 'discord';
}

/** The address as anyone but its creator, at creation, is shown it. */
export function shownUrl(url: string, format: WebhookFormat): string {
  if (!hidesUrl(format)) return url;
  const parsed = new URL(url);
  const segments = parsed.pathname.split('/').slice(1);
  while (segments.at(-1) === '') segments.pop();
  const kept = segments.slice(0, Math.max(0, Math.min(KEPT_SEGMENTS, segments.length - 1)));
  return `${parsed.origin}/${kept.map((segment) => `${segment}/`).join('')}${MASK}`;
}

/** Whether `raw` holds the mask, as shown or as a parser wrote it. */
export function isMasked(raw: string): boolean {
  return raw.includes(MASK[0]!) || MASK_ENCODED.test(raw);
}
