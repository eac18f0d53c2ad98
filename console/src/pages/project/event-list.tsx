/**
 * The feed's rows, virtualised: rows have one fixed height, so only those in view (and a few more)
 * are in the document, however many events the list holds. When new events arrive on top while the
 * reader has scrolled down, the view is moved by as much, so what they read stays where it was, and
 * a button says how many came and goes back to the newest.
 */
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { Event } from '../../api.ts';
import { EventRow } from './event-row.tsx';

/** A row's height in px: the same as `.event`'s in styles.css. */
export const ROW = 96;
const OVERSCAN = 6;

export function EventList({ events }: { events: Event[] }) {
  const scroller = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(800);
  const firstId = useRef<string | undefined>(undefined);
  /** Events that arrived above the view since the reader scrolled down. */
  const [unseen, setUnseen] = useState(0);

  useLayoutEffect(() => {
    const element = scroller.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setHeight(element.clientHeight));
    observer.observe(element);
    setHeight(element.clientHeight);
    return () => observer.disconnect();
  }, []);

  // Keep the reader's place when events are added above it.
  useLayoutEffect(() => {
    const element = scroller.current;
    const previous = firstId.current;
    firstId.current = events[0]?.id;
    if (!element || !previous || element.scrollTop === 0) return;
    const added = events.findIndex((event) => event.id === previous);
    if (added > 0) {
      element.scrollTop += added * ROW;
      setScrollTop(element.scrollTop);
      setUnseen((count) => count + added);
    }
  }, [events]);

  const start = Math.max(0, Math.floor(scrollTop / ROW) - OVERSCAN);
  const end = Math.min(events.length, Math.ceil((scrollTop + height) / ROW) + OVERSCAN);
  return (
    <>
      {unseen > 0 && (
        <button
          type="button"
          class="secondary new-events"
          onClick={() => {
            scroller.current?.scrollTo({ top: 0 });
            setScrollTop(0);
            setUnseen(0);
          }}
        >
          {unseen === 1 ? '1 new event' : `${unseen.toLocaleString()} new events`}: show the newest
        </button>
      )}
      <div
        ref={scroller}
        class="event-scroller"
        tabIndex={0}
        role="region"
        aria-label={`Events, newest first: ${events.length} loaded`}
        onScroll={(e) => {
          setScrollTop(e.currentTarget.scrollTop);
          if (e.currentTarget.scrollTop < ROW) setUnseen(0);
        }}
      >
        <ol class="events" style={{ paddingTop: `${start * ROW}px`, paddingBottom: `${(events.length - end) * ROW}px` }}>
          {events.slice(start, end).map((event, i) => (
            <EventRow key={event.id} event={event} position={start + i + 1} total={events.length} />
          ))}
        </ol>
      </div>
    </>
  );
}
