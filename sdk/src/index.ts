/**
 * @signalboard/sdk: the Signalboard client. `new Signalboard({ baseUrl, token })` has every
 * operation of the contract as a method of its resource (`sb.projects.create(…)`,
 * `sb.insights.increment(…)`, `sb.events.stream(…)`), throws one error type, SignalboardError, and
 * retries what is safe to retry; createRawClient makes the low-level client typed by path. README.md
 * tells all.
 */
import type { components, operations, paths } from '../../spec/generated/openapi.js';

export { Signalboard, type EventsResource, type InsightsResource, type StreamOptions } from './client.js';
export type { SignalboardOptions, RequestOptions } from './options.js';
export {
  SignalboardError,
  SignalboardApiError,
  SignalboardConnectionError,
  SignalboardTimeoutError,
  SignalboardAbortError,
  type ErrorCode,
  type ClientErrorCode,
} from './errors.js';
export { Paginated } from './pagination.js';
export { SignalboardPromise, type ResponseInfo, type RateLimit, type WithResponse } from './response.js';
export { createRawClient, type RawClient } from './raw.js';
export { streamEvents, SseParser, type StreamDisconnect, type StreamEventsOptions, type SseMessage } from './stream.js';
export type { Body, Data, OperationId, Page, PathParam, Query } from './contract.js';
export { VERSION } from './generated/version.js';

export type { components, operations, paths };
export type Schemas = components['schemas'];
export type Event = Schemas['Event'];
