/** Times and values as people read them, in their own locale and zone. */
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const number = new Intl.NumberFormat();

export function formatTime(iso: string): string {
  return dateTime.format(new Date(iso));
}

/** "12 seconds ago", "3 hours ago", or the date past a week. */
export function ago(iso: string, now = Date.now()): string {
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 45) return relative.format(seconds, 'second');
  if (abs < 2700) return relative.format(Math.round(seconds / 60), 'minute');
  if (abs < 86_400) return relative.format(Math.round(seconds / 3600), 'hour');
  if (abs < 604_800) return relative.format(Math.round(seconds / 86_400), 'day');
  return formatTime(iso);
}

export function formatValue(value: unknown): string {
  if (typeof value === 'number') return number.format(value);
  return String(value);
}
