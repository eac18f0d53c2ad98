/**
 * Icons that earlier releases kept as files, `DATA_DIR/icons/<sha256>.png`, move into the icon
 * store. A file moves only if it is what its name says: a PNG whose SHA-256 is the name, no larger
 * than an icon may be. It is stored, then removed; anything else is left where it is and reported.
 * Files that release's pruner had moved aside (`.<sha256>.<uuid>.prune`, possibly still referred
 * to) move the same way; its temporary files (`.<sha256>.<uuid>.tmp`) are removed once older than
 * a grace period (a younger one may be an older instance's write in progress).
 *
 * Safe to run again, and on several instances sharing the folder at once: storing is idempotent by
 * content, and a file another run removed first is skipped.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { inspectPng, PngRejected } from './png.js';
import { MAX_ICON_BYTES, MAX_ICON_SIDE, type IconStore } from './icons.js';

const ICON_FILE = /^([0-9a-f]{64})\.png$/;
const ASIDE_FILE = /^\.([0-9a-f]{64})\.[0-9a-f-]{36}\.prune$/;
const TEMP_FILE = /^\.[0-9a-f]{64}\.[0-9a-f-]{36}\.tmp$/;

export interface DiskMove {
  /** Icon files stored and removed. */
  moved: number;
  /** Temporary files removed. */
  removed: number;
  /** Files left in place, each with why. */
  left: { file: string; reason: string }[];
}

function errorCode(error: unknown): unknown {
  return (error as NodeJS.ErrnoException).code;
}

/** Why `bytes` may not move in as the icon `key`, or undefined when they may. */
function refusal(key: string, bytes: Buffer): string | undefined {
  if (createHash('sha256').update(bytes).digest('hex') !== key) return 'its name is not the SHA-256 of its content';
  try {
    inspectPng(bytes, MAX_ICON_SIDE);
  } catch (error) {
    if (error instanceof PngRejected) return `not an icon: ${error.message}`;
    throw error;
  }
  return undefined;
}

/** `work`'s result, or undefined when its file is gone (another instance moved or removed it). */
async function unlessGone<T>(work: Promise<T>): Promise<T | undefined> {
  try {
    return await work;
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Moves the icon files of `dir` into `store`, and removes the folder once it is empty. A store that
 * fails stops the move (its error is thrown): what is left moves at the next run.
 */
export async function moveDiskIcons(dir: string, store: Pick<IconStore, 'saveAlone'>, tempGraceMs: number): Promise<DiskMove> {
  const result: DiskMove = { moved: 0, removed: 0, left: [] };
  const names = await unlessGone(readdir(dir));
  if (!names) return result;
  const cutoff = Date.now() - tempGraceMs;
  for (const name of names) {
    const file = path.join(dir, name);
    const key = ICON_FILE.exec(name)?.[1] ?? ASIDE_FILE.exec(name)?.[1];
    if (key === undefined && !TEMP_FILE.test(name)) {
      result.left.push({ file: name, reason: 'not an icon file' });
      continue;
    }
    const stat = await unlessGone(lstat(file));
    if (!stat) continue;
    if (key === undefined) {
      if (stat.mtimeMs < cutoff) {
        await rm(file, { force: true });
        result.removed += 1;
      }
      continue;
    }
    const unfit = !stat.isFile() ? 'not a regular file' : stat.size > MAX_ICON_BYTES ? 'larger than an icon may be' : undefined;
    if (unfit) {
      result.left.push({ file: name, reason: unfit });
      continue;
    }
    const bytes = await unlessGone(readFile(file));
    if (!bytes) continue;
    const why = refusal(key, bytes);
    if (why !== undefined) {
      result.left.push({ file: name, reason: why });
      continue;
    }
    await store.saveAlone({ bytes, sha256: key });
    await rm(file, { force: true });
    result.moved += 1;
  }
  await rmdir(dir).catch((error: unknown) => {
    // Not empty (files left, a temporary file still young), or gone already.
    if (!['ENOTEMPTY', 'EEXIST', 'ENOENT'].includes(errorCode(error) as string)) throw error;
  });
  return result;
}
