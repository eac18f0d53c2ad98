import { chmod, link, mkdir, readFile, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import path from 'node:path';

/** The embedded data folder cannot be used as it is; the message says why and what to do. */
export class DataDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Another live process owns the embedded data folder. */
export class DataDirInUseError extends DataDirError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`the data folder ${dataDir} is in use by process ${pid}`);
  }
}

/**
 * Makes `dataDir` (creating it if need be) a folder only this user can enter, whatever its mode was:
 * the database's files inside are then out of other users' reach whatever their own modes, which no
 * umask governs (PGlite sets them 0666 itself) and whose write-ahead log holds every row written. A
 * folder owned by another user is refused rather than used: its owner could open it again at any time.
 */
export async function closeDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const uid = process.getuid?.();
  // No POSIX owners and modes to check (Windows).
  if (uid === undefined) return;
  const { uid: owner, mode } = await stat(dataDir);
  if (owner !== uid) {
    throw new DataDirError(
      `the data folder ${dataDir} belongs to user ${owner}, but this process runs as user ${uid}: ` +
        `run it as user ${owner}, or give the folder to user ${uid} (chown)`,
    );
  }
  if ((mode & 0o777) === 0o700) return;
  // Checked again after the change: some file systems (a share, a FUSE mount) accept chmod and ignore it.
  const failure = await chmod(dataDir, 0o700).then(
    () => undefined,
    (err: Error) => err.message,
  );
  if (((await stat(dataDir)).mode & 0o077) !== 0) {
    throw new DataDirError(
      `the data folder ${dataDir} is open to other users (mode ${(mode & 0o777).toString(8)}) and could not ` +
        `be closed to them${failure ? `: ${failure}` : ' (its file system keeps the mode)'}`,
    );
  }
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// Lock files this process holds. A lock naming our own pid that is not in here was left by an
// earlier process that had the same pid, as happens to PID 1 when a container restarts.
const held = new Set<string>();

// A pid means nothing on another host, and a second container on the same volume (as `docker
// compose run` makes) is another host. So the owner touches its lock every few seconds, and a lock
// from another host is taken over only once it has not been touched for a while.
const HEARTBEAT_MS = 5_000;
const STALE_AFTER_MS = 20_000;

interface Owner {
  pid: number;
  host: string;
}

/** True when `owner` names a process on this host that is running (and is not this process). */
export function isOwnerAliveHere(owner: Owner): boolean {
  return owner.host === hostname() && owner.pid !== process.pid && isProcessAlive(owner.pid);
}

/**
 * Takes `<dataDir>/service.lock` for the life of the embedded database: a second PGlite on the same
 * folder would not fail but silently diverge. Node has no flock, so this is an exclusively created
 * file naming its owner, replaced when that owner is gone. Returns the release function (idempotent).
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const file = path.join(dataDir, 'service.lock');
  const content = JSON.stringify({ pid: process.pid, host: hostname(), startedAt: new Date().toISOString() });
  // Written aside and hard-linked into place (atomic, fails if the name exists), so a reader never
  // sees a lock that is created but still empty.
  const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(draft, content, { mode: 0o600 });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await link(draft, file);
        held.add(file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const owner = await readOwner(file);
      if (owner !== undefined && !(await isStale(file, owner))) throw new DataDirInUseError(dataDir, owner.pid);
      if (attempt > 0) throw new Error(`could not replace the stale lock ${file}`);
      await unlink(file).catch(ignoreMissing);
    }
  } finally {
    await unlink(draft).catch(ignoreMissing);
  }
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(file, now, now).catch(() => undefined); // removed under us: nothing left to keep fresh
  }, HEARTBEAT_MS).unref();
  return async () => {
    if (!held.delete(file)) return;
    clearInterval(heartbeat);
    await unlink(file).catch(ignoreMissing);
  };
}

async function isStale(file: string, owner: Owner): Promise<boolean> {
  if (owner.host !== hostname()) return Date.now() - (await stat(file)).mtimeMs > STALE_AFTER_MS;
  return owner.pid === process.pid ? !held.has(file) : !isProcessAlive(owner.pid);
}

function ignoreMissing(err: NodeJS.ErrnoException): void {
  if (err.code !== 'ENOENT') throw err;
}

/** The owner named in a lock or operator file; undefined if it names none. */
async function readOwner(file: string): Promise<Owner | undefined> {
  try {
    const { pid, host } = JSON.parse(await readFile(file, 'utf8')) as Partial<Owner>;
    return Number.isInteger(pid) && typeof host === 'string' ? { pid: pid!, host } : undefined;
  } catch {
    // Not ours to read, or damaged: no live owner can be named, so it is treated as stale.
    return undefined;
  }
}
