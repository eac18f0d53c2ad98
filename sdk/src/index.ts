/**
 * Typed client for the Signalboard API. Every route of the contract is a typed call:
 *
 *   const sb = createClient({ baseUrl: 'http://localhost:3000', token });
 *   const { data, error, response } = await sb.GET('/v1/projects/{namespace}', { params: { path: { namespace: 'acme' } } });
 *
 * `data` is the success envelope, `error` the failure envelope (`error.error.code` is an ErrorCode).
 */
import createFetchClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './generated/openapi.js';

export type { components, operations, paths };
export type Schemas = components['schemas'];
export type ErrorCode = Schemas['ErrorCode'];
export type ErrorEnvelope = Schemas['ErrorEnvelope'];

export interface SignalboardClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the service runs, e.g. `http://localhost:3000` (no `/v1`: paths carry it). */
  baseUrl: string;
  /** A session (`ses_…`) or API (`api_…`) token, sent as `Authorization: Bearer <token>`. */
  token?: string;
}

export type SignalboardClient = Client<paths>;

export function createClient({ baseUrl, token, headers, ...rest }: SignalboardClientOptions): SignalboardClient {
  const client = createFetchClient<paths>({ baseUrl: baseUrl.replace(/\/+$/, ''), headers, ...rest });
  if (token !== undefined) {
    client.use({
      onRequest({ request }) {
        request.headers.set('Authorization', `Bearer ${token}`);
        return request;
      },
    });
  }
  return client;
}
