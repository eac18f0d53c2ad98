/**
 * The low-level client: every path of the contract as a typed call (openapi-fetch), answering
 * `{ data, error, response }` for every status instead of throwing:
 *
 *   const { data, error, response } = await raw.GET('/v1/projects/{namespace}', { params: { path: { namespace: 'acme' } } });
 *
 * `data` is the success envelope, `error` the failure envelope. It goes through the same sending as
 * the resource methods (the client's credential, User-Agent, timeout and retries), with two
 * differences: it sends an Idempotency-Key only when the call's headers carry one, so a POST or
 * PATCH is repeated only then; and it reads each answer whole, so it is no way to the event stream
 * (use `events.stream`). A failure without an answer throws a SignalboardError, as everywhere.
 */
import createFetchClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import type { HttpMethod, PathsWithMethod, RequiredKeysOf } from 'openapi-typescript-helpers';
import type { paths } from '../../spec/generated/openapi.js';
import { send } from './http.js';
import { clientHeaders, policyOf, settingsOf, type SignalboardOptions } from './options.js';

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

export type RawClient = Omit<Client<paths>, 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH'> & {
  GET: StrictMethod<'get'>;
  PUT: StrictMethod<'put'>;
  POST: StrictMethod<'post'>;
  DELETE: StrictMethod<'delete'>;
  PATCH: StrictMethod<'patch'>;
};

/** Statuses whose answer has no body (a Response refuses to be made with one). */
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/** A low-level client, with the same options as a Signalboard client. */
export function createRawClient(options: SignalboardOptions): RawClient {
  const settings = settingsOf(options);
  const client = createFetchClient<paths>({
    baseUrl: settings.baseUrl,
    fetch: async (request: Request) => {
      const headers = clientHeaders(settings);
      request.headers.forEach((value, name) => headers.set(name, value));
      const body = request.body ? await request.text() : undefined;
      const answer = await send(
        { method: request.method, url: request.url, headers, body },
        policyOf(settings, { signal: request.signal }),
      );
      return new Response(NULL_BODY_STATUSES.has(answer.status) ? null : answer.body, {
        status: answer.status,
        headers: answer.headers,
      });
    },
  });
  // The same client: only its call signatures are stricter (see StrictMethod).
  return client as unknown as RawClient;
}
