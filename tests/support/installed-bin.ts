/** Runs a packed package's command where it was installed, as a user would with npx. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npx --no-install <bin> <args>` in `dir`: its exit code and output, whether it succeeded or not. */
export function runInstalledBin(
  dir: string,
  bin: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeout?: number; maxBuffer?: number } = {},
): Promise<Outcome> {
  return run('npx', ['--no-install', bin, ...args], { cwd: dir, ...options }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: unknown; stdout?: string; stderr?: string }) => ({
      code: typeof error.code === 'number' ? error.code : -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? '',
    }),
  );
}
