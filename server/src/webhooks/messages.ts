/**
 * What a delivery's request carries, by the endpoint's format.
 *
 * - `standard` (Standard Webhooks): the body `{ type, timestamp, data }`, `timestamp` when the
 *   change happened; the headers `webhook-id` (the delivery's id, the same on every attempt),
 *   `webhook-timestamp` (the attempt's, in seconds) and `webhook-signature`, made by the
 *   `standardwebhooks` package with each secret that signs (two, space-separated, during a rotation).
 * - `slack` and `discord`: their incoming webhooks' message, `{ text }` and `{ content }`, one line
 *   saying what happened. Text a publisher wrote is escaped as each one needs (Slack's `&`, `<`, `>`),
 *   and a Discord message mentions nobody (`allowed_mentions`), whatever an event's title says.
 *   Neither checks a signature, so none is sent; `webhook-id` still is.
 */
import { Webhook } from 'standardwebhooks';
import type { components } from '../../../spec/generated/openapi.js';
import type { WebhookFormat, WebhookType } from '../domain/webhooks.js';

type Schemas = components['schemas'];

/** A change as it is sent: its type, when it happened, and `data` as the API shows it. */
export type Message =
  | { type: 'event.created'; data: Schemas['Event'] }
  | { type: 'insight.updated'; data: Schemas['Insight'] }
  | { type: 'member.joined' | 'member.left'; data: Schemas['Member'] }
  | { type: 'project.updated'; data: Schemas['Project'] }
  | { type: 'webhook.test'; data: { message: string } };

export type MessageType = Message['type'] & (WebhookType | 'webhook.test');

/** The one line Slack and Discord show; `strong` marks what stands out in that service's markup. */
function line(message: Message, strong: (text: string) => string): string {
  switch (message.type) {
    case 'event.created': {
      const { emoji, event, feed, description } = message.data;
      return `${emoji ?? '📣'} ${strong(event)} in #${feed}${description ? `: ${description}` : ''}`;
    }
    case 'insight.updated':
      return `${message.data.emoji ?? '📊'} ${strong(message.data.title)}: ${String(message.data.value)}`;
    case 'member.joined':
      return `👋 ${strong(message.data.username)} joined the project`;
    case 'member.left':
      return `👋 ${strong(message.data.username)} left the project`;
    case 'project.updated':
      return `✏️ Project ${strong(message.data.name)} (${message.data.namespace}) was updated`;
    case 'webhook.test':
      return `✅ ${message.data.message}`;
  }
}

const slackEscape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A request's body and headers for one attempt at `format`. */
export function requestFor(
  format: WebhookFormat,
  delivery: { id: string; createdAt: Date; secrets: string[] },
  message: Message,
  now: Date,
): { body: string; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'webhook-id': delivery.id, 'user-agent': 'Signalboard-Webhooks/1' };
  if (format === 'slack') return { body: JSON.stringify({ text: slackEscape(line(message, (t) => `*${t}*`)) }), headers };
  if (format === 'discord') {
    const content = line(message, (t) => `**${t}**`).slice(0, 2000);
    return { body: JSON.stringify({ content, allowed_mentions: { parse: [] } }), headers };
  }
  // When the change happened: an event's storing, or the commit that queued the delivery.
  const timestamp = message.type === 'event.created' ? message.data.created_at : delivery.createdAt.toISOString();
  const body = JSON.stringify({ type: message.type, timestamp, data: message.data });
  const signature = delivery.secrets.map((secret) => new Webhook(secret).sign(delivery.id, now, body)).join(' ');
  return { body, headers: { ...headers, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': signature } };
}
