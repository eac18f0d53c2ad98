/**
 * Typed client for the Signalboard API. Every route of the contract is a typed call:
 *
 *   const sb = createClient({ baseUrl: 'http://localhost:3000', token });
 *   const { data, error, response } = await sb.GET('/v1/projects/{namespace}', { params: { path: { namespace: 'acme' } } });
 *
 * `data` is the success envelope, `error` the failure envelope (`error.error.code` is an ErrorCode).
 *
 * Events have two helpers on top: `publish(...)`, which answers the created Event or throws a
 * SignalboardError, and `streamEvents(...)`, an async iterator over a project's live stream that
 * reconnects with `Last-Event-ID` (see stream.ts).
 */
import createFetchClient, { type Client, type ClientOptions, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import type { HttpMethod, PathsWithMethod, RequiredKeysOf } from 'openapi-typescript-helpers';
import type { components, operations, paths } from '../../spec/generated/openapi.js';
import { SignalboardError } from './errors.js';
import { streamEvents, type StreamEventsOptions } from './stream.js';

export type { components, operations, paths };
export type Schemas = components['schemas'];
export type ErrorCode = Schemas['ErrorCode'];
export type ErrorEnvelope = Schemas['ErrorEnvelope'];
export type Event = Schemas['Event'];
export type PublishEventRequest = Schemas['PublishEventRequest'];

export { SignalboardError, streamEvents, type StreamEventsOptions };
export { SseParser, type SseMessage } from './stream.js';

export interface SignalboardClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the service runs, e.g. `http://localhost:3000` (no `/v1`: paths carry it). */
  baseUrl: string;
  /** A session (`ses_…`) or API (`api_…`) token, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** On 429, wait as `Retry-After` says and try again, up to this many times (default 0: answer the 429). */
  retryOnRateLimit?: number;
}

/** The longest `Retry-After` the client is willing to sleep through, in seconds. */
const MAX_RETRY_AFTER_S = 120;

/** A fetch that honours `Retry-After` on 429 up to `retries` times. */
function retryingFetch(retries: number, inner: (request: Request) => Promise<Response>): (request: Request) => Promise<Response> {
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const response = await inner(request.clone());
      const wait = Number(response.headers.get('Retry-After'));
      if (response.status !== 429 || attempt >= retries || !(wait >= 0) || wait > MAX_RETRY_AFTER_S) return response;
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  };
}

type Init<P extends keyof paths, M extends HttpMethod> = MaybeOptionalInit<paths[P], M>;

/**
 * openapi-fetch's call signature, with the request's options typed by the path alone instead of
 * inferred from the call. TypeScript then checks the object literal against the contract's type,
 * so a field the contract does not define fails to compile (the service would answer it 400),
 * not only a missing or mistyped one.
 */
type StrictMethod<M extends HttpMethod> = <P extends PathsWithMethod<paths, M>>(
  url: P,
  ...init: RequiredKeysOf<NonNullable<Init<P, M>>> extends never ? [Init<P, M>?] : [Init<P, M>]
) => Promise<FetchResponse<Extract<paths[P][M], Record<string | number, unknown>>, Init<P, M>, `${string}/${string}`>>;

export type SignalboardClient = Omit<Client<paths>, 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH'> & {
  GET: StrictMethod<'get'>;
  PUT: StrictMethod<'put'>;
  POST: StrictMethod<'post'>;
  DELETE: StrictMethod<'delete'>;
  PATCH: StrictMethod<'patch'>;
};

export function createClient({ baseUrl, token, headers, retryOnRateLimit = 0, ...rest }: SignalboardClientOptions): SignalboardClient {
  const fetch = retryOnRateLimit > 0 ? retryingFetch(retryOnRateLimit, rest.fetch ?? globalThis.fetch) : rest.fetch;
  const client = createFetchClient<paths>({ baseUrl: baseUrl.replace(/\/+$/, ''), headers, ...rest, ...(fetch ? { fetch: fetch } : {}) });
  if (token !== undefined) {
    client.use({
      onRequest({ request }) {
        request.headers.set('Authorization', `Bearer ${token}`);
        return request;
      },
    });
  }
  // The same client: only its call signatures are stricter (see StrictMethod).
  return client as unknown as SignalboardClient;
}

/** Where to publish: the project's namespace and the feed's name, with the event itself. */
export interface PublishInput extends PublishEventRequest {
  namespace: string;
  feed: string;
}

function isClient(target: SignalboardClient | SignalboardClientOptions): target is SignalboardClient {
  return typeof (target as Partial<SignalboardClient>).POST === 'function';
}

/**
 * Publishes an event (`POST /v1/projects/{namespace}/feeds/{feed}/events`), with a client made by
 * createClient or the options to make one. Answers the created Event; a refusal throws a
 * SignalboardError carrying the status, the envelope's `code`, `message` and `details`.
 *
 *   const event = await publish(sb, { namespace: 'acme', feed: 'signups', event: 'New signup', emoji: '🎉', tags: { plan: 'pro' } });
 */
export async function publish(target: SignalboardClient | SignalboardClientOptions, input: PublishInput): Promise<Event> {
  const client = isClient(target) ? target : createClient(target);
  const { namespace, feed, ...body } = input;
  const { data, error, response } = await client.POST('/v1/projects/{namespace}/feeds/{feed}/events', {
    params: { path: { namespace, feed } },
    body,
  });
  if (data) return data.data;
  throw SignalboardError.fromEnvelope(response.status, error);
}

/** A project's events in one object: `publish(feed, event)` and `stream({ lastEventId?, signal? })`. */
export interface ProjectEvents {
  publish(feed: string, event: PublishEventRequest): Promise<Event>;
  stream(options?: Omit<StreamEventsOptions, 'baseUrl' | 'token' | 'namespace'>): AsyncGenerator<Event, void, undefined>;
}

export function projectEvents(options: SignalboardClientOptions & { namespace: string }): ProjectEvents {
  const { namespace, ...clientOptions } = options;
  const client = createClient(clientOptions);
  return {
    publish: (feed, event) => publish(client, { ...event, namespace, feed }),
    stream: (streamOptions = {}) => streamEvents({ ...streamOptions, baseUrl: options.baseUrl, token: options.token, namespace }),
  };
}

/** The paths whose GET answers a cursor-paginated list. */
export type ListPath = {
  [P in keyof paths]: paths[P] extends {
    get: { responses: { 200: { content: { 'application/json': { data: { items: unknown[]; next_cursor: string | null } } } } } };
  }
    ? P
    : never;
}[keyof paths];

type ListGet<P extends ListPath> = paths[P] extends { get: infer G } ? G : never;
type ListItem<P extends ListPath> =
  ListGet<P> extends { responses: { 200: { content: { 'application/json': { data: { items: (infer I)[] } } } } } } ? I : never;
type ListParams<P extends ListPath> = ListGet<P> extends { parameters: infer Q } ? Q : never;

/**
 * Every item of a cursor-paginated list, page after page, as one async iterator; a refused page
 * throws a SignalboardError.
 *
 *   for await (const insight of paginate(sb, '/v1/projects/{namespace}/insights', { path: { namespace: 'acme' } })) { … }
 */
export async function* paginate<P extends ListPath>(
  client: SignalboardClient,
  path: P,
  params: Omit<ListParams<P>, 'header' | 'cookie'> & { query?: { limit?: number } } = {} as never,
): AsyncGenerator<ListItem<P>, void, undefined> {
  const base = params as { path?: Record<string, string>; query?: Record<string, unknown> };
  let cursor: string | undefined;
  do {
    const get = client.GET as unknown as (
      path: string,
      init: unknown,
    ) => Promise<{ data?: { data: { items: ListItem<P>[]; next_cursor: string | null } }; error?: unknown; response: Response }>;
    const { data, error, response } = await get(path, {
      params: { path: base.path, query: { ...base.query, ...(cursor ? { cursor } : {}) } },
    });
    if (!data) throw SignalboardError.fromEnvelope(response.status, error);
    yield* data.data.items;
    cursor = data.data.next_cursor ?? undefined;
  } while (cursor);
}
