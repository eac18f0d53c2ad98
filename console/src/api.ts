/**
 * The console's one way to the service: the SDK, on this page's own origin. The session is the
 * service's HttpOnly cookie (set by a login or sign-up asked with `cookie: true`), which `fetch`
 * sends with every same-origin request, so the client carries no token and no script can read it.
 */
import { Signalboard, SignalboardApiError, SignalboardError, type Schemas } from '@signalboard/sdk';

export type { Schemas };
export type Project = Schemas['Project'];
export type Feed = Schemas['Feed'];
export type Event = Schemas['Event'];
export type User = Schemas['User'];
export type Member = Schemas['Member'];

export const sb = new Signalboard({ baseUrl: location.origin, maxRetries: 1, timeout: 30_000 });

/** What a refusal says to people: the envelope's `message` (with the field the service pointed at), or what went wrong on the way. */
export function errorMessage(error: unknown): string {
  if (error instanceof SignalboardError) {
    const detail = error.details?.[0];
    return detail && !error.message.includes(detail.message) ? `${error.message} (${detail.message})` : error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

/** The HTTP status of a refusal, 0 when none came. */
export function statusOf(error: unknown): number {
  return error instanceof SignalboardError ? error.status : 0;
}

export function isApiError(error: unknown, code: string): boolean {
  return error instanceof SignalboardApiError && error.code === code;
}

/** The service refused the request for what it holds at `path` (a detail of its 400, e.g. `/query/group_by`). */
export function refusedAt(error: unknown, path: string): boolean {
  return error instanceof SignalboardError && error.details?.some((detail) => detail.path === path) === true;
}
