/**
 * Runs `transcodePng` off the event loop, on one worker thread shared by the process. Jobs run one
 * at a time, each bounded in time (the worker is ended and started afresh when one overruns), and
 * the queue is bounded, in all and per requester (a user): past either, or past the deadline, the
 * caller gets 503 `unavailable`. The bound per requester keeps one user's many icons in flight from
 * taking every place in the queue while other users' icons are refused. The worker holds the
 * process open only while it has work, and ends after a while without any.
 */
import type { Worker } from 'node:worker_threads';
import { Unavailable } from '../errors.js';
import { startModuleWorker } from '../worker-thread.js';
import type { Transcoded } from './png.js';
import type { WorkerReply, WorkerRequest } from './png-worker.js';

/** Transcoded, or the reason the image is refused (worded to follow "icon "). */
export type CodecResult = ({ ok: true } & Transcoded) | { ok: false; refusal: string };

export interface CodecLimits {
  /** How long one job may run in the worker. */
  timeoutMs: number;
  /** Jobs that may wait for the worker (behind the running one, or for it to start). */
  maxQueued: number;
  /** Jobs one requester may have waiting or running; past it, only that requester's are refused. */
  maxPerRequester: number;
  /** How long an idle worker is kept. */
  idleMs: number;
}

interface Job {
  request: WorkerRequest;
  resolve(result: CodecResult): void;
  reject(error: Error): void;
}

export class PngCodec {
  private worker: Worker | undefined;
  /** The worker has loaded its modules: a job's time runs from here, never through a start. */
  private ready = false;
  private running: { job: Job; timer: NodeJS.Timeout } | undefined;
  private readonly queue: Job[] = [];
  /** Jobs waiting or running, by requester; a requester with none has no entry. */
  private readonly perRequester = new Map<string, number>();
  private idleTimer: NodeJS.Timeout | undefined;

  /** Read at each job. */
  constructor(private readonly limits: CodecLimits) {}

  /** `requester`: who the job is for (a user's id), whom the per-requester bound counts. */
  transcode(bytes: Buffer, maxSide: number, requester: string): Promise<CodecResult> {
    const held = this.perRequester.get(requester) ?? 0;
    if (held >= this.limits.maxPerRequester) {
      return Promise.reject(new Unavailable('You have too many icons being processed; retry shortly.', 1));
    }
    if (this.queue.length >= this.limits.maxQueued) {
      return Promise.reject(new Unavailable('Too many icons are being processed; retry shortly.', 1));
    }
    this.perRequester.set(requester, held + 1);
    const job = new Promise<CodecResult>((resolve, reject) => {
      this.queue.push({ request: { bytes: new Uint8Array(bytes), maxSide }, resolve, reject });
      this.next();
    });
    return job.finally(() => {
      const left = this.perRequester.get(requester)! - 1;
      if (left === 0) this.perRequester.delete(requester);
      else this.perRequester.set(requester, left);
    });
  }

  private next(): void {
    if (this.running) return;
    clearTimeout(this.idleTimer);
    if (this.queue.length === 0) {
      this.worker?.unref();
      this.idleTimer = setTimeout(() => this.stopWorker(), this.limits.idleMs).unref();
      return;
    }
    const worker = this.ensureWorker();
    worker.ref();
    if (!this.ready) return; // the worker's `ready` calls next() again
    const job = this.queue.shift()!;
    const timer = setTimeout(() => {
      this.stopWorker();
      this.finish((pending) => pending.reject(new Unavailable('The icon took too long to process; retry later.', 5)));
    }, this.limits.timeoutMs);
    this.running = { job, timer };
    worker.postMessage(job.request);
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startModuleWorker(import.meta.url, 'png-worker');
    worker.on('message', (reply: WorkerReply | 'ready') => {
      if (reply === 'ready') {
        this.ready = true;
        this.next();
      } else this.finish((job) => job.resolve(reply.ok ? { ok: true, png: Buffer.from(reply.png), sha256: reply.sha256 } : reply));
    });
    // A worker that fails or exits takes its current job with it, or every waiting job if it never
    // started (a start that fails would fail again); the next job starts another worker.
    const lost = () => {
      if (this.worker !== worker) return;
      const started = this.ready;
      this.stopWorker();
      const failed = new Unavailable('The icon could not be processed; retry later.', 5);
      if (!started) for (const job of this.queue.splice(0)) job.reject(failed);
      this.finish((job) => job.reject(failed));
    };
    worker.on('error', lost);
    worker.on('exit', lost);
    this.worker = worker;
    this.ready = false;
    return worker;
  }

  private finish(settle: (job: Job) => void): void {
    const running = this.running;
    if (!running) return;
    clearTimeout(running.timer);
    this.running = undefined;
    settle(running.job);
    this.next();
  }

  private stopWorker(): void {
    const worker = this.worker;
    this.worker = undefined;
    this.ready = false;
    void worker?.terminate();
  }
}

/** The process's codec: every icon store shares its one worker. */
export const sharedCodec = new PngCodec({ timeoutMs: 5_000, maxQueued: 16, maxPerRequester: 2, idleMs: 30_000 });
