/**
 * The Signalboard client: every operation of the contract as a method of its resource
 * (generated/operations.ts), with two written by hand on top, `insights.increment` and
 * `events.stream`. The low-level client typed by path is apart (createRawClient, raw.ts), so that a
 * bundle that does not use it does not carry it.
 *
 *   const sb = new Signalboard({ baseUrl: 'https://signalboard.example.com', token: process.env.SIGNALBOARD_TOKEN });
 *   const project = await sb.projects.create({ name: 'Acme', namespace: 'acme' });
 *   await sb.events.publish('acme', 'general', { event: 'Deployed', emoji: '🚀' });
 *   for await (const insight of sb.insights.list('acme')) console.log(insight.title, insight.value);
 */
import type { components } from '../../spec/generated/openapi.js';
import { Requester, type RequestOptions } from './caller.js';
import type { Body, Data } from './contract.js';
import { SignalboardError } from './errors.js';
import * as generated from './generated/operations.js';
import { clientHeaders, settingsOf, type Settings, type SignalboardOptions } from './options.js';
import type { SignalboardPromise } from './response.js';
import { streamEvents, type StreamEventsOptions } from './stream.js';

// The hand-written methods' parameters are plain types, as the generated ones are, and held to the
// contract too: the stream's in stream.ts (StreamParamTypes), `increment`'s by its call of `update`.
export interface InsightsResource extends generated.InsightsResource {
  /**
   * Adds `by` (1 unless given) to a numeric insight, atomically: two increments at once both count.
   * The same call as `update(namespace, insightId, { increment: by })`, answering the Insight.
   */
  increment(
    namespace: string,
    insightId: string,
    by?: NonNullable<Body<'updateInsight'>['increment']>,
    options?: RequestOptions,
  ): SignalboardPromise<Data<'updateInsight'>>;
}

/** A stream's options; the client gives the rest (URL, token, headers, fetch). */
export type StreamOptions = Omit<StreamEventsOptions, 'baseUrl' | 'token' | 'namespace' | 'fetch' | 'headers'>;

export interface EventsResource extends generated.EventsResource {
  /**
   * The project's events as they are published (`options.feed`: one feed's only), as an async
   * iterator that reconnects by itself and resumes with `Last-Event-ID`: nothing lost, nothing
   * twice (see streamEvents). Leaving the loop ends it; aborting `options.signal` ends it with a
   * SignalboardAbortError, as it ends every call; a refusal (401, 403, 404, 400) throws a
   * SignalboardApiError.
   *
   * `GET /v1/projects/{namespace}/events/stream`
   */
  stream(namespace: string, options?: StreamOptions): AsyncGenerator<components['schemas']['Event'], void, undefined>;
}

export class Signalboard extends generated.Resources {
  declare readonly insights: InsightsResource;
  declare readonly events: EventsResource;
  /** This client's options, checked: withToken makes another client from them. */
  readonly #settings: Settings;

  constructor(options: SignalboardOptions) {
    const settings = settingsOf(options);
    super(new Requester(settings));
    this.#settings = settings;
    const insights = this.insights;
    Object.assign(insights, {
      increment: (namespace, insightId, by = 1, callOptions) => insights.update(namespace, insightId, { increment: by }, callOptions),
    } satisfies Pick<InsightsResource, 'increment'>);
    Object.assign(this.events, {
      stream: (namespace, streamOptions = {}) =>
        streamEvents({
          ...streamOptions,
          baseUrl: settings.baseUrl,
          namespace,
          fetch: settings.fetch,
          headers: clientHeaders(settings), // the credential among them
        }),
    } satisfies Pick<EventsResource, 'stream'>);
  }

  /**
   * A new client with this one's options (base URL, timeout, retries, headers, fetch) and `token`
   * as its credential, e.g. the session token `auth.login` answered. This client keeps its own.
   *
   *   const { token } = await anonymous.auth.login({ login: 'ada', password });
   *   const sb = anonymous.withToken(token);
   */
  withToken(token: string): Signalboard {
    // An empty or missing token would make a client without a credential, silently.
    if (typeof token !== 'string' || token === '')
      throw new SignalboardError(`token must be a non-empty string, not ${JSON.stringify(token)}.`, { code: 'invalid_argument' });
    return new Signalboard({ ...this.#settings, token });
  }
}
