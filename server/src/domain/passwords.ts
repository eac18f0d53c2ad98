/**
 * bcrypt off the event loop. bcryptjs is pure JavaScript: one hash at cost 10 holds the thread it
 * runs on for tens of milliseconds, so on the event loop a burst of 20 sign-ups would stall every
 * other request for a second or more. Hashes and comparisons run here on a small pool of worker
 * threads instead, one job per worker at a time, the rest queued in order.
 *
 * The worker is a few lines of JavaScript evaluated from a string, loading bcryptjs by the absolute
 * path resolved here: it runs the same under tsx and as compiled JavaScript, and loads neither tsx
 * nor anything of the service. Workers start on first use; only a busy one keeps the process alive.
 * A worker that dies fails its job and is replaced on the next one.
 */
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const bcryptjsPath = createRequire(import.meta.url).resolve('bcryptjs');

/**
 * The workers' nice value (Linux): hashing yields the CPU to serving requests. Where cores are
 * spare a hash runs at full speed; where the machine is saturated, a sign-up waits longer rather
 * than every other request (docs/performance-journal.md).
 */
export const WORKER_NICE = 10;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const bcrypt = require(${JSON.stringify(bcryptjsPath)});
// setpriority on a thread id sets that thread's nice value alone; elsewhere this is skipped.
try {
  const tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  require('node:os').setPriority(tid, ${WORKER_NICE});
} catch {}
parentPort.on('message', ({ id, op, password, rounds, hash }) => {
  try {
    const result = op === 'hash' ? bcrypt.hashSync(password, rounds) : bcrypt.compareSync(password, hash);
    parentPort.postMessage({ id, result });
  } catch (error) {
    parentPort.postMessage({ id, error: String(error && error.message || error) });
  }
});
`;

type Job = { op: 'hash'; password: string; rounds: number } | { op: 'compare'; password: string; hash: string };

interface Pending {
  job: Job;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  current: (Pending & { id: number }) | undefined;
}

/**
 * One core is left to the event loop (and, on a small machine, to PostgreSQL): a pool of
 * `cores - 1` workers, at least 1 and at most 4.
 */
export const DEFAULT_POOL_SIZE = Math.max(1, Math.min(4, availableParallelism() - 1));

export class PasswordPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextId = 0;
  private closed = false;

  constructor(private readonly size = DEFAULT_POOL_SIZE) {}

  hash(password: string, rounds: number): Promise<string> {
    return this.run({ op: 'hash', password, rounds }) as Promise<string>;
  }

  compare(password: string, hash: string): Promise<boolean> {
    return this.run({ op: 'compare', password, hash }) as Promise<boolean>;
  }

  /** Jobs waiting for a worker, and jobs running. */
  get load(): { queued: number; running: number; workers: number } {
    return { queued: this.queue.length, running: this.slots.filter((s) => s.current).length, workers: this.slots.length };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pending of this.queue.splice(0)) pending.reject(new Error('password pool closed'));
    await Promise.all(this.slots.splice(0).map((slot) => slot.worker.terminate()));
  }

  private run(job: Job): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('password pool closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => !s.current);
      if (!slot && this.slots.length < this.size) slot = this.spawn();
      if (!slot) return;
      const pending = this.queue.shift()!;
      const id = this.nextId++;
      slot.current = { ...pending, id };
      // Busy workers keep the process alive until their job is done; idle ones do not.
      slot.worker.ref();
      slot.worker.postMessage({ id, ...pending.job });
    }
  }

  private spawn(): Slot {
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
    const slot: Slot = { worker, current: undefined };
    worker.on('message', (message: { id: number; result?: unknown; error?: string }) => {
      const current = slot.current;
      if (!current || current.id !== message.id) return;
      slot.current = undefined;
      worker.unref();
      if (message.error !== undefined) current.reject(new Error(message.error));
      else current.resolve(message.result);
      this.dispatch();
    });
    const fail = (error: Error) => {
      const index = this.slots.indexOf(slot);
      if (index >= 0) this.slots.splice(index, 1);
      slot.current?.reject(error);
      slot.current = undefined;
      if (!this.closed) this.dispatch();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`password worker exited with code ${code}`)));
    // After the listeners: attaching one refs the worker again.
    worker.unref();
    this.slots.push(slot);
    return slot;
  }
}

/** The process's pool, shared by every server in it (the tests run several). */
let shared: PasswordPool | undefined;
const pool = () => (shared ??= new PasswordPool());

/** bcrypt hash of `password` at cost `rounds`, computed on a worker thread. */
export function hashPassword(password: string, rounds: number): Promise<string> {
  return pool().hash(password, rounds);
}

/** Whether `password` matches the bcrypt `hash`, checked on a worker thread. */
export function comparePassword(password: string, hash: string): Promise<boolean> {
  return pool().compare(password, hash);
}
