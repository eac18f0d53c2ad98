/**
 * The worker thread that transcodes icons (png-codec.ts): decoding and encoding a 1024×1024 image
 * costs tens of milliseconds of CPU, which would stall every request on the event loop.
 */
import { parentPort } from 'node:worker_threads';
import { PngRejected, transcodePng } from './png.js';

export type WorkerRequest = { bytes: Uint8Array; maxSide: number };
export type WorkerReply = { ok: true; png: Uint8Array; sha256: string } | { ok: false; refusal: string };

const port = parentPort!;
port.on('message', ({ bytes, maxSide }: WorkerRequest) => {
  let reply: WorkerReply;
  try {
    const { png, sha256 } = transcodePng(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), maxSide);
    reply = { ok: true, png, sha256 };
  } catch (error) {
    // Anything pngjs throws on input that passed inspection is a refusal of that input too.
    reply = { ok: false, refusal: error instanceof PngRejected ? error.message : 'could not be decoded as a PNG image' };
  }
  port.postMessage(reply);
});
// Loaded: the codec sends jobs, and times them, from here on.
port.postMessage('ready');
