/**
 * The live stream of a project's events (the SDK's `events.stream`, which reconnects and resumes by
 * itself), batched: events are gathered as they arrive and handed to the page once per animation
 * frame, newest first, at most `cap` of them. A thousand events a second thus cost the page one
 * render a frame, and a hidden tab (no frames) keeps only the newest `cap`. `dropped` counts the
 * times older live events had to go: the page then reads its history again from the newest, so that
 * "Load more" reaches the events that left the live list (no gap between the two).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage, sb, type Event } from '../../api.ts';

export type LiveStatus = 'connecting' | 'live' | 'reconnecting' | 'stopped';

export interface Live {
  /** Newest first. */
  events: Event[];
  status: LiveStatus;
  /** Why the stream stopped (a refusal reconnecting cannot change). */
  problem: string | null;
  /** How many times live events were dropped for the cap. */
  dropped: number;
}

export function useLiveEvents(namespace: string, onBatch: (batch: Event[]) => void, cap = 5000): Live {
  const [events, setEvents] = useState<Event[]>([]);
  const [status, setStatus] = useState<LiveStatus>('connecting');
  const [problem, setProblem] = useState<string | null>(null);
  const [dropped, setDropped] = useState(0);
  const onBatchRef = useRef(onBatch);
  onBatchRef.current = onBatch;

  useEffect(() => {
    const controller = new AbortController();
    let pending: Event[] = []; // oldest first
    let frame = 0;
    const flush = () => {
      frame = 0;
      const batch = pending.reverse(); // newest first
      pending = [];
      setEvents((previous) => {
        if (previous.length + batch.length <= cap) return batch.concat(previous);
        setDropped((count) => count + 1);
        return batch.length >= cap ? batch.slice(0, cap) : batch.concat(previous.slice(0, cap - batch.length));
      });
      onBatchRef.current(batch);
    };
    setEvents([]);
    setStatus('connecting');
    setProblem(null);
    void (async () => {
      try {
        for await (const event of sb.events.stream(namespace, {
          signal: controller.signal,
          onOpen: () => setStatus('live'),
          onDisconnect: () => setStatus('reconnecting'),
        })) {
          pending.push(event);
          if (pending.length > cap * 2) {
            pending = pending.slice(-cap);
            setDropped((count) => count + 1);
          }
          if (!frame) frame = requestAnimationFrame(flush);
        }
      } catch (error) {
        if (!controller.signal.aborted) setProblem(errorMessage(error));
      }
      if (!controller.signal.aborted) setStatus('stopped');
    })();
    return () => {
      controller.abort();
      if (frame) cancelAnimationFrame(frame);
    };
  }, [namespace, cap]);

  return { events, status, problem, dropped };
}
