import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import type { Config } from '../config.js';
import { hasEmbeddedDatabase } from '../db/embedded.js';
import { DataDirError, isOwnerAliveHere } from '../db/lock.js';
import { openDatabase, unitOfWork } from '../db/orm.js';
import {
  createInviteCode,
  InviteCodeInputError,
  listInviteCodes,
  type CreatedInviteCode,
  type CreateInviteCodeInput,
  type InviteCodeRow,
} from '../domain/invite-codes.js';
import { NoPendingEmailChange, operatorEmailLink } from '../domain/email-change.js';
import { operatorResetLink, UnknownUserError } from '../domain/password-reset.js';
import type { Logger } from '../logger.js';
import { operatorFilePath, type OperatorFile } from './channel.js';

/** The operator's operations (invite codes, reset links), wherever they run. */
export interface OperatorStore {
  /** Where the work is done, to tell the operator. */
  via: string;
  create(input: CreateInviteCodeInput): Promise<CreatedInviteCode>;
  list(): Promise<InviteCodeRow[]>;
  /** A password reset link with a new token for the user (domain/password-reset.ts); UnknownUserError when there is none. */
  resetLink(username: string): Promise<string>;
  /** The confirm link of the user's pending e-mail change, with a new token (domain/email-change.ts); NoPendingEmailChange when there is none. */
  emailLink(username: string): Promise<string>;
}

/**
 * The embedded data folder holds no database, and the command was not asked to make one: opening it
 * would make a new, empty database (as the service does at its first start), most likely beside the
 * one the service uses, and the command's work (an invite code, a link) would land where no service reads it.
 */
export class NoEmbeddedDatabaseError extends DataDirError {
  constructor(dataDir: string, create: 'offered' | 'not offered') {
    super(
      `no embedded database in ${dataDir} (the data folder: DATA_DIR, default ./data), and this command makes none: ` +
        `run it with the same DATA_DIR (or DATABASE_URL) the service runs with` +
        (create === 'offered'
          ? `, or add --create to make a new database in ${dataDir} on purpose`
          : ' (a new database would have no users)'),
    );
  }
}

/** How an operator command treats an embedded data folder that holds no database yet. */
export interface MissingDatabase {
  /** Open it all the same, making a new database (`--create`). */
  create: boolean;
  /** Whether the command takes `--create`, for the refusal to offer it. */
  offered: boolean;
}

/**
 * Runs `fn` against the database the service uses: PostgreSQL directly; in embedded mode through
 * the running service's operator channel if there is one, or else by opening the data folder itself
 * (taking its lock, so a service starting meanwhile refuses rather than diverges). A data folder with
 * no database in it is refused (NoEmbeddedDatabaseError), untouched, unless `missing.create`: an
 * operator command never makes a database by accident.
 */
export async function withOperatorStore<T>(
  config: Config,
  logger: Logger,
  missing: MissingDatabase,
  fn: (store: OperatorStore) => Promise<T>,
): Promise<T> {
  if (!config.databaseUrl) {
    const service = await readOperatorFile(config.dataDir);
    if (service) return fn(remoteStore(service));
    if (!missing.create && !(await hasEmbeddedDatabase(config.dataDir))) {
      throw new NoEmbeddedDatabaseError(config.dataDir, missing.offered ? 'offered' : 'not offered');
    }
  }
  const db = await openDatabase(config, logger);
  try {
    return await fn({
      via: db.description,
      create: (input) => createInviteCode(unitOfWork(db.orm), input),
      list: () => listInviteCodes(unitOfWork(db.orm)),
      resetLink: (username) => operatorResetLink(unitOfWork(db.orm), username, config.passwordReset.url),
      emailLink: (username) => operatorEmailLink(unitOfWork(db.orm), username, config.emailChange.confirmUrl),
    });
  } finally {
    await db.close();
  }
}

/** The operator file of a service running on this host, if there is one. */
async function readOperatorFile(dataDir: string): Promise<OperatorFile | undefined> {
  let file: OperatorFile;
  try {
    file = JSON.parse(await readFile(operatorFilePath(dataDir), 'utf8')) as OperatorFile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read ${operatorFilePath(dataDir)} (run this as the service's user): ${(err as Error).message}`, { cause: err });
  }
  // Left behind by a service that died, or written by one in another container: not reachable here.
  // A file without a socket names no channel this command can ask.
  return isOwnerAliveHere(file) && typeof file.socket === 'string' ? file : undefined;
}

/** One request to the operator channel's socket: its status and its body as text. */
function exchange(socket: string, method: string, path: string, body: string | undefined): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json' };
    const req = request({ socketPath: socket, path, method, headers, timeout: 30_000 });
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(body);
  });
}

function remoteStore(service: OperatorFile): OperatorStore {
  async function call<R>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<R> {
    let res: { status: number; text: string };
    try {
      res = await exchange(service.socket, method, path, body === undefined ? undefined : JSON.stringify(body));
    } catch (err) {
      throw new Error(`the running service (process ${service.pid}) did not answer on ${service.socket}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    let answer: { error?: string } = {};
    try {
      answer = JSON.parse(res.text) as { error?: string };
    } catch {
      // Not JSON: the status alone is reported.
    }
    if (res.status === 400) throw new InviteCodeInputError(answer.error ?? 'bad request');
    if (res.status === 404 && path === '/reset-links') throw new UnknownUserError(answer.error ?? 'no such user');
    if (res.status === 404 && path === '/email-links') throw new NoPendingEmailChange(answer.error ?? 'no pending e-mail change');
    if (res.status < 200 || res.status > 299) {
      throw new Error(`the running service (process ${service.pid}) answered ${res.status} ${answer.error ?? ''}`.trim());
    }
    return answer as R;
  }
  const date = (s: string | null) => (s === null ? null : new Date(s));

  return {
    via: `the running service (process ${service.pid})`,
    async create(input) {
      const c = await call<Omit<CreatedInviteCode, 'expires_at'> & { expires_at: string | null }>('POST', '/invite-codes', {
        uses: input.uses,
        expires_in_days: input.expiresInDays,
      });
      return { ...c, expires_at: date(c.expires_at) };
    },
    async list() {
      type Row = Omit<InviteCodeRow, 'expires_at' | 'created_at'> & { expires_at: string | null; created_at: string };
      const rows = await call<Row[]>('GET', '/invite-codes');
      return rows.map((r) => ({ ...r, expires_at: date(r.expires_at), created_at: new Date(r.created_at) }));
    },
    async resetLink(username) {
      return (await call<{ link: string }>('POST', '/reset-links', { username })).link;
    },
    async emailLink(username) {
      return (await call<{ link: string }>('POST', '/email-links', { username })).link;
    },
  };
}
