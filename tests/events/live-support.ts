/**
 * What the live stream's suites share (live*.test.ts): its paths, the wire form of an event, publishing,
 * consuming the SDK's iterator, and the owner whose project each test streams.
 */
import { expect } from 'chai';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Signalboard, SignalboardAbortError, type Event, type Schemas } from '../../sdk/src/index.js';
import { baseUrl } from '../support/harness.js';
import { apiToken, signUp, type TestUser } from '../support/accounts.js';
import { projectPath } from '../support/projects.js';

export const streamPath = (namespace: string) => projectPath(namespace, '/events/stream');
export const streamUrl = (namespace: string, base = baseUrl()) => base + streamPath(namespace);
export const wire = (event: Event) => `id: ${event.id}\nevent: event\ndata: ${JSON.stringify(event)}\n\n`;

/** A user and an API token of theirs with every scope: the owner of the projects a suite streams. */
export async function streamingOwner(): Promise<{ owner: TestUser; key: string }> {
  const owner = await signUp();
  return { owner, key: await apiToken(owner.token) };
}

/** Publishes an event to the project's `general` feed with the SDK. */
export function publish(base: string, token: string, namespace: string, event: Schemas['PublishEventRequest']): Promise<Event> {
  return new Signalboard({ baseUrl: base, token }).events.publish(namespace, 'general', event);
}

export async function publishMany(base: string, token: string, namespace: string, count: number, label: string): Promise<Event[]> {
  const events: Event[] = [];
  for (let i = 0; i < count; i++) events.push(await publish(base, token, namespace, { event: `${label} ${i}` }));
  return events;
}

/** Consumes an SDK iterator in the background, into `events`, until it throws (its signal's abort included). */
export function consume(iterator: AsyncGenerator<Event, void, undefined>) {
  const events: Event[] = [];
  const done = (async () => {
    for await (const event of iterator) events.push(event);
  })();
  return { events, done };
}

/** Waits for a consumed stream that a test aborted: it ends, as every SDK call does on an abort, with a SignalboardAbortError. */
export async function abortedEnd(done: Promise<void>): Promise<SignalboardAbortError> {
  const error = await done.then(
    () => new Error('the stream ended without an error'),
    (caught: unknown) => caught,
  );
  expect(error).to.be.instanceOf(SignalboardAbortError);
  return error as SignalboardAbortError;
}

/** The garbage collector, exposed at run time (the test process is not started with --expose-gc). */
export function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** How long the server lets a client leave its buffer full before disconnecting it (live/streams.ts). */
export const STALL_MS = 15_000;

export const ids = (events: { id: string }[]) => events.map((e) => e.id);
export const messageIds = (messages: { id: string | undefined }[]) => messages.map((m) => m.id);
