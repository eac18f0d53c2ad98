/** Times and values as people read them, in their own locale and zone. */

/**
 * The formatters, made when first needed: the first one made loads the locale's data, 10–20 ms
 * in a fresh tab, which a page better pays while it waits for its data (`prepareFormats`) than
 * when it renders.
 */
let formats: { dateTime: Intl.DateTimeFormat; relative: Intl.RelativeTimeFormat; number: Intl.NumberFormat } | undefined;

export function prepareFormats() {
  return (formats ??= {
    dateTime: new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' }),
    relative: new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' }),
    number: new Intl.NumberFormat(),
  });
}

export function formatTime(iso: string): string {
  return prepareFormats().dateTime.format(new Date(iso));
}

/** "12 seconds ago", "3 hours ago", or the date past a week. */
export function ago(iso: string, now = Date.now()): string {
  const { relative } = prepareFormats();
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 45) return relative.format(seconds, 'second');
  if (abs < 2700) return relative.format(Math.round(seconds / 60), 'minute');
  if (abs < 86_400) return relative.format(Math.round(seconds / 3600), 'hour');
  if (abs < 604_800) return relative.format(Math.round(seconds / 86_400), 'day');
  return formatTime(iso);
}

export function formatValue(value: unknown): string {
  if (typeof value === 'number') return prepareFormats().number.format(value);
  return String(value);
}

const DURATION_UNITS = [
  ['day', 86_400],
  ['hour', 3_600],
  ['minute', 60],
] as const;

/** A span of seconds in the largest unit that counts it whole: "3 days", "36 hours", "90 minutes". */
export function formatDuration(seconds: number): string {
  const [unit, size] = DURATION_UNITS.find(([, size]) => seconds % size === 0) ?? ['second', 1];
  return new Intl.NumberFormat(undefined, { style: 'unit', unit, unitDisplay: 'long' }).format(seconds / size);
}
