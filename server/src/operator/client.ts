import { readFile } from 'node:fs/promises';
import type { Config } from '../config.js';
import { isOwnerAliveHere } from '../db/lock.js';
import { openDatabase } from '../db/orm.js';
import {
  createInviteCode,
  InviteCodeInputError,
  listInviteCodes,
  type CreatedInviteCode,
  type CreateInviteCodeInput,
  type InviteCodeRow,
} from '../domain/invite-codes.js';
import type { Logger } from '../logger.js';
import { operatorFilePath, type OperatorFile } from './channel.js';

/** The invite-code operations, wherever they run. */
export interface InviteCodeStore {
  /** Where the work is done, to tell the operator. */
  via: string;
  create(input: CreateInviteCodeInput): Promise<CreatedInviteCode>;
  list(): Promise<InviteCodeRow[]>;
}

/**
 * Runs `fn` against the database the service uses: PostgreSQL directly; in embedded mode through
 * the running service's operator channel if there is one, or else by opening the data folder itself
 * (taking its lock, so a service starting meanwhile refuses rather than diverges).
 */
export async function withInviteCodeStore<T>(config: Config, logger: Logger, fn: (store: InviteCodeStore) => Promise<T>): Promise<T> {
  if (!config.databaseUrl) {
    const service = await readOperatorFile(config.dataDir);
    if (service) return fn(remoteStore(service));
  }
  const db = await openDatabase(config, logger);
  try {
    return await fn({
      via: db.description,
      create: (input) => createInviteCode(db.orm.em.fork(), input),
      list: () => listInviteCodes(db.orm.em.fork()),
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
    throw new Error(`cannot read ${operatorFilePath(dataDir)} (run this as the service's user): ${(err as Error).message}`);
  }
  // Left behind by a service that died, or written by one in another container: not reachable here.
  return isOwnerAliveHere(file) ? file : undefined;
}

function remoteStore(service: OperatorFile): InviteCodeStore {
  async function call<R>(method: 'GET' | 'POST', body?: unknown): Promise<R> {
    let res: Response;
    try {
      res = await fetch(`http://127.0.0.1:${service.port}/invite-codes`, {
        method,
        headers: { authorization: `Bearer ${service.secret}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new Error(`the running service (process ${service.pid}) did not answer on 127.0.0.1:${service.port}: ${(err as Error).message}`);
    }
    const answer = (await res.json().catch(() => ({}))) as { error?: string };
    if (res.status === 400) throw new InviteCodeInputError(answer.error ?? 'bad request');
    if (!res.ok) throw new Error(`the running service (process ${service.pid}) answered ${res.status} ${answer.error ?? ''}`.trim());
    return answer as R;
  }
  const date = (s: string | null) => (s === null ? null : new Date(s));

  return {
    via: `the running service (process ${service.pid})`,
    async create(input) {
      const c = await call<Omit<CreatedInviteCode, 'expires_at'> & { expires_at: string | null }>('POST', {
        uses: input.uses,
        expires_in_days: input.expiresInDays,
      });
      return { ...c, expires_at: date(c.expires_at) };
    },
    async list() {
      const rows = await call<(Omit<InviteCodeRow, 'expires_at' | 'created_at'> & { expires_at: string | null; created_at: string })[]>('GET');
      return rows.map((r) => ({ ...r, expires_at: date(r.expires_at), created_at: new Date(r.created_at) }));
    },
  };
}
