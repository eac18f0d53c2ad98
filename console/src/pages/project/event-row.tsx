/** One event as a row of the feed: every field rendered as text, never as markup. */
import type { Event } from '../../api.ts';
import { ago, formatTime, formatValue } from '../../format.ts';

export function EventRow({ event, position, total }: { event: Event; position: number; total: number }) {
  const tags = Object.entries(event.tags);
  return (
    <li class="event" aria-posinset={position} aria-setsize={total}>
      <span class="event-emoji" aria-hidden={event.emoji ? undefined : true}>
        {event.emoji ?? '•'}
      </span>
      <div class="event-body">
        <div class="event-line">
          <strong class="event-title">{event.event}</strong>
          <span class="chip feed-chip">#{event.feed}</span>
          {event.notify && (
            <span class="chip" title="The publisher asked for people to be told">
              notify
            </span>
          )}
          <time class="event-time muted" dateTime={event.timestamp} title={formatTime(event.timestamp)}>
            {ago(event.timestamp)}
          </time>
        </div>
        <p class="event-description">{event.description ?? ''}</p>
        {(event.user_id || tags.length > 0) && (
          <ul class="tags" aria-label="Tags">
            {event.user_id && <li class="chip user-chip">user: {event.user_id}</li>}
            {tags.map(([key, value]) => (
              <li key={key} class="chip">
                {key}: {formatValue(value)}
              </li>
            ))}
          </ul>
        )}
      </div>
    </li>
  );
}
