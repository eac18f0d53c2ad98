/**
 * What a delivery's request carries, by the endpoint's format.
 *
 * - `standard` (Standard Webhooks): the body `{ type, timestamp, data }`, `timestamp` when the
 *   change happened; the headers `webhook-id` (the delivery's id, the same on every attempt),
 *   `webhook-timestamp` (the attempt's, in seconds) and `webhook-signature`, made by the
 *   `standardwebhooks` package with each secret that signs (two, space-separated, during a rotation).
 * - `slack` and `discord`: their incoming webhooks' message, `{ text }` and `{ content }`, one line
 *   saying what happened. Neither checks a signature, so none is sent; `webhook-id` still is.
 *
 * Every value in that line was written by someone (a publisher, who may hold no more than a
 * publish-only token sitting in a web page; a member), so it reaches Slack and Discord as plain
 * text, never as markup: no link with a text of its own (`[phish](https://evil.example)`,
 * `<https://evil.example|click>`), no mention (`<!channel>`, `@everyone`, `<@id>`), no formatting.
 * Slack: `mrkdwn: false` and `&`, `<`, `>` as entities (which Slack reads even then). Discord: every
 * markdown character behind a backslash, and `allowed_mentions` that lets no mention ping.
 */
import { Webhook } from 'standardwebhooks';
import type { components } from '../../../spec/generated/openapi.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { eventsByIds } from '../db/repositories/events-rows.js';
import type { ClaimedDelivery, WebhookFormat, WebhookType } from '../db/repositories/webhook-outbox.js';
import type { ChangeShapes } from '../domain/change-shapes.js';

type Schemas = components['schemas'];

/** A change as it is sent: its type, when it happened, and `data` as the API shows it. */
export type Message =
  | { type: 'event.created'; data: Schemas['Event'] }
  | { type: 'insight.updated'; data: Schemas['Insight'] }
  | { type: 'member.joined' | 'member.left'; data: Schemas['Member'] }
  | { type: 'project.updated'; data: Schemas['Project'] }
  | { type: 'webhook.test'; data: { message: string } };

export type MessageType = Message['type'] & (WebhookType | 'webhook.test');

/**
 * The messages queued deliveries send, by delivery id, whether the deliverer sends them or a member
 * retries one now: an event as the API shows it now, read from the events still stored, or another
 * change as it was queued. A delivery whose event is no longer stored (retention, or its feed's
 * delete, took it) has none: there is nothing left to send.
 */
export async function messagesOf(
  em: EntityManager,
  deliveries: Pick<ClaimedDelivery, 'id' | 'type' | 'eventId' | 'payload'>[],
  shapes: Pick<ChangeShapes, 'event'>,
): Promise<Map<string, Message>> {
  const eventIds = deliveries.flatMap((d) => (d.eventId === null ? [] : [d.eventId]));
  const events = new Map((eventIds.length > 0 ? await eventsByIds(em, eventIds) : []).map((e) => [e.id, e]));
  const messages = new Map<string, Message>();
  for (const delivery of deliveries) {
    if (delivery.eventId === null) {
      messages.set(delivery.id, { type: delivery.type, data: delivery.payload } as Message);
      continue;
    }
    const event = events.get(delivery.eventId);
    if (event) messages.set(delivery.id, { type: 'event.created', data: shapes.event(event) } as Message);
  }
  return messages;
}

/** How a chat service takes text: `text` makes a written value plain, `strong` marks what stands out (already plain). */
interface Markup {
  text(value: string): string;
  strong(plain: string): string;
}

/** The one line Slack and Discord show, each value written by someone passed through `markup.text`. */
function line(message: Message, { text, strong }: Markup): string {
  switch (message.type) {
    case 'event.created': {
      const { emoji, event, feed, description } = message.data;
      return `${emoji ? text(emoji) : '📣'} ${strong(text(event))} in #${text(feed)}${description ? `: ${text(description)}` : ''}`;
    }
    case 'insight.updated':
      return `${message.data.emoji ? text(message.data.emoji) : '📊'} ${strong(text(message.data.title))}: ${text(String(message.data.value))}`;
    case 'member.joined':
      return `👋 ${strong(text(message.data.username))} joined the project`;
    case 'member.left':
      return `👋 ${strong(text(message.data.username))} left the project`;
    case 'project.updated':
      return `✏️ Project ${strong(text(message.data.name))} (${text(message.data.namespace)}) was updated`;
    case 'webhook.test':
      return `✅ ${text(message.data.message)}`;
  }
}

/** Slack with `mrkdwn: false`: no emphasis, and the three characters Slack reads as markup even then as entities. */
const SLACK: Markup = {
  text: (value) => value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'),
  strong: (plain) => plain,
};

/**
 * Discord's markdown: a backslash before every character it gives a meaning (emphasis, code,
 * spoilers, quotes, headings, lists, links, mentions, timestamps, custom emoji), and before the dot
 * of a numbered list's `1.` at a line's start.
 */
const DISCORD: Markup = {
  text: (value) => value.replace(/[\\*_~`|<>[\]()#-]/g, '\\$&').replace(/^(\s*\d+)\./gm, '$1\\.'),
  strong: (plain) => `**${plain}**`,
};

/** A request's body and headers for one attempt at `format`. */
export function requestFor(
  format: WebhookFormat,
  delivery: { id: string; createdAt: Date; secrets: string[] },
  message: Message,
  now: Date,
): { body: string; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'webhook-id': delivery.id, 'user-agent': 'Signalboard-Webhooks/1' };
  if (format === 'slack') return { body: JSON.stringify({ text: line(message, SLACK), mrkdwn: false }), headers };
  if (format === 'discord') {
    const content = line(message, DISCORD).slice(0, 2000);
    return { body: JSON.stringify({ content, allowed_mentions: { parse: [] } }), headers };
  }
  // When the change happened: an event's storing, or the commit that queued the delivery.
  const timestamp = message.type === 'event.created' ? message.data.created_at : delivery.createdAt.toISOString();
  const body = JSON.stringify({ type: message.type, timestamp, data: message.data });
  const signature = delivery.secrets.map((secret) => new Webhook(secret).sign(delivery.id, now, body)).join(' ');
  return { body, headers: { ...headers, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': signature } };
}
