/**
 * The embedded database's own thread: PGlite runs here, off the service's event loop, so a long
 * statement keeps neither `/healthz` nor any request that does not need the database waiting, and
 * the service can end a statement that overruns by ending this thread (embedded.ts). Each request
 * is answered once, in order; the main thread sends the next only after the answer.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

export interface EngineSettings {
  /** PGlite's folder. */
  dir: string;
  /** PostgreSQL's `temp_file_limit` for every statement, in kB: a sort or a hash past it fails rather than fill the disk. */
  tempFileLimitKb: number;
}

export type EngineRequest =
  /** One protocol message of the connection that holds the session; the answer is what PostgreSQL wrote back. */
  | { kind: 'exchange'; message: Uint8Array }
  /** The connection went away: roll back what its session left open. */
  | { kind: 'rollback' }
  | { kind: 'close' };

export type EngineReply =
  { kind: 'ready' } | { kind: 'answer'; answer: Uint8Array } | { kind: 'done' } | { kind: 'failed'; message: string };

const port = parentPort!;
const settings = workerData as EngineSettings;

async function open(): Promise<PGlite> {
  return PGlite.create(settings.dir, {
    startParams: [...PGlite.defaultStartParams, '-c', `temp_file_limit=${settings.tempFileLimitKb}kB`],
  });
}

async function serve(pglite: PGlite, request: EngineRequest): Promise<EngineReply> {
  switch (request.kind) {
    case 'exchange': {
      const chunks: Uint8Array[] = [];
      // Copied: PGlite hands out views of a buffer it reuses.
      const onRawData = (data: Uint8Array) => chunks.push(data.slice());
      await pglite.runExclusive(() => pglite.execProtocolRawStream(request.message, { onRawData }));
      return { kind: 'answer', answer: Buffer.concat(chunks) };
    }
    case 'rollback':
      if (pglite.isInTransaction()) await pglite.exec('rollback');
      return { kind: 'done' };
    case 'close':
      await pglite.close();
      return { kind: 'done' };
  }
}

const failed = (error: unknown): EngineReply => ({ kind: 'failed', message: error instanceof Error ? error.message : String(error) });

open().then(
  (pglite) => {
    port.on('message', (request: EngineRequest) => {
      serve(pglite, request).then(
        (reply) => port.postMessage(reply),
        (error: unknown) => port.postMessage(failed(error)),
      );
    });
    port.postMessage({ kind: 'ready' } satisfies EngineReply);
  },
  (error: unknown) => port.postMessage(failed(error)),
);
