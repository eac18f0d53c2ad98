/**
 * Desktop notifications for events published with `notify: true`, once the person allowed them
 * (the browser asks when they press the button; nothing is asked unprompted). At most one a
 * second: a burst shows as one notification counting the rest.
 */
import type { VNode } from 'preact';
import { useCallback, useRef, useState } from 'preact/hooks';
import type { Event } from '../../api.ts';

const supported = typeof Notification !== 'undefined';

export function useNotifications(): { tell: (batch: Event[]) => void; control: VNode | null } {
  const [permission, setPermission] = useState<NotificationPermission | 'unsupported'>(() =>
    supported ? Notification.permission : 'unsupported',
  );
  const last = useRef(0);
  const tell = useCallback((batch: Event[]) => {
    if (!supported || Notification.permission !== 'granted') return;
    const wanted = batch.filter((event) => event.notify);
    const newest = wanted[0];
    if (!newest) return;
    const now = Date.now();
    if (now - last.current < 1000) return;
    last.current = now;
    const more = wanted.length > 1 ? ` (and ${wanted.length - 1} more)` : '';
    new Notification(`${newest.emoji ? `${newest.emoji} ` : ''}${newest.event}${more}`, {
      body: newest.description ?? `#${newest.feed}`,
      tag: `signalboard-${newest.id}`,
    });
  }, []);
  const control =
    permission === 'default' ? (
      <button type="button" class="secondary" onClick={() => void Notification.requestPermission().then(setPermission)}>
        Turn on desktop notifications
      </button>
    ) : permission === 'granted' ? (
      <span class="muted">Desktop notifications are on for events marked notify.</span>
    ) : permission === 'denied' ? (
      <span class="muted">Desktop notifications are blocked in this browser.</span>
    ) : null;
  return { tell, control };
}
