/** One event as a row of the feed: every field rendered as text, never as markup. */
import type { Event } from '../../api.ts';
import { ago, formatTime, formatValue } from '../../format.ts';
import { Emoji, UserText } from '../../ui.tsx';

export function EventRow({ event, position, total }: { event: Event; position: number; total: number }) {
  const tags = Object.entries(event.tags);
  return (
    <li class="event" aria-posinset={position} aria-setsize={total}>
      <Emoji class="event-emoji" text={event.emoji} fallback="•" />
      <div class="event-body">
        <div class="event-line">
          <strong class="event-title">
            <UserText text={event.event} />
          </strong>
          <span class="chip feed-chip">
            #<UserText text={event.feed} />
          </span>
          {event.notify && (
            <span class="chip" title="The publisher asked for people to be told">
              notify
            </span>
          )}
          <time class="event-time muted" dateTime={event.timestamp} title={formatTime(event.timestamp)}>
            {ago(event.timestamp)}
          </time>
        </div>
        <p class="event-description">
          <UserText text={event.description ?? ''} />
        </p>
        {(event.user_id || tags.length > 0) && (
          <ul class="tags" aria-label="Tags">
            {event.user_id && (
              <li class="chip user-chip">
                user: <UserText text={event.user_id} />
              </li>
            )}
            {tags.map(([key, value]) => (
              <li key={key} class="chip">
                <UserText text={key} />: <UserText text={formatValue(value)} />
              </li>
            ))}
          </ul>
        )}
      </div>
    </li>
  );
}
