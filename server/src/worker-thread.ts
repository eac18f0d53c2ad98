/**
 * Starts a worker thread on one of the service's own modules, whether the service runs compiled
 * (`dist/…/*.js`) or from its TypeScript sources under tsx (the tests): on Node 20 a worker does not
 * inherit tsx's loader, so the worker registers it before it loads the module.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker running the module `name` (without its extension) of the folder of `from`, the
 * `import.meta.url` of the module that asks.
 */
export function startModuleWorker(from: string, name: string, options: WorkerOptions = {}): Worker {
  const extension = path.extname(fileURLToPath(from));
  const file = new URL(`./${name}${extension}`, from);
  if (extension === '.js') return new Worker(file, options);
  const tsx = createRequire(from).resolve('tsx/cjs/api');
  return new Worker(`require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(fileURLToPath(file))});`, {
    ...options,
    eval: true,
  });
}
