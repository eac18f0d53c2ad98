import { mkdtemp, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { unitOfWork, type Database } from '../db/orm.js';
import { createInviteCode, InviteCodeInputError, listInviteCodes } from '../domain/invite-codes.js';
import { NoPendingEmailChange, operatorEmailLink } from '../domain/email-change.js';
import { operatorResetLink, UnknownUserError } from '../domain/password-reset.js';
import type { Logger } from '../logger.js';

/** What `<dataDir>/operator.json` holds: how a command on this host reaches the running service. */
export interface OperatorFile {
  pid: number;
  host: string;
  /** The channel's Unix socket. */
  socket: string;
}

export const operatorFilePath = (dataDir: string): string => path.join(dataDir, 'operator.json');

const MAX_BODY_BYTES = 4096;
/** The longest Unix socket path Linux takes (sun_path is 108 bytes, with the final NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * In embedded mode the service owns the only connection to the database, so operator commands
 * (`npm run invite`, `npm run user -- reset-link`) ask it instead, over a Unix socket in a folder
 * only the service's user can enter: the data folder (closed to others at every start), or a folder
 * of its own when that path is too long for a socket. Whoever reaches the socket could open the data
 * folder itself, so every request that arrives is answered; no TCP port is opened. Links are made
 * with the service's own pages (`PASSWORD_RESET_URL`, `EMAIL_CONFIRM_URL`).
 */
export async function startOperatorChannel(
  db: Database,
  dataDir: string,
  logger: Logger,
  pages: { passwordResetUrl: string | undefined; emailConfirmUrl: string | undefined },
): Promise<{ close(): Promise<void> }> {
  const place = await socketPlace(dataDir);
  const server = createServer((req, res) => {
    handle(req)
      .then(({ status, body }) => send(res, status, body))
      .catch((err: unknown) => {
        if (err instanceof HttpError) return send(res, err.status, { error: err.message });
        if (err instanceof InviteCodeInputError) return send(res, 400, { error: err.message });
        if (err instanceof UnknownUserError || err instanceof NoPendingEmailChange) return send(res, 404, { error: err.message });
        logger.error({ err }, 'operator request failed');
        send(res, 500, { error: 'internal error' });
      });
  });

  /** The links a user's username makes, by route. */
  const LINKS: Partial<Record<string, { what: string; make(em: EntityManager, username: string): Promise<string> }>> = {
    'POST /reset-links': { what: 'password reset link', make: (em, username) => operatorResetLink(em, username, pages.passwordResetUrl) },
    'POST /email-links': { what: 'e-mail change link', make: (em, username) => operatorEmailLink(em, username, pages.emailConfirmUrl) },
  };

  async function handle(req: IncomingMessage): Promise<{ status: number; body: unknown }> {
    const route = `${req.method} ${new URL(req.url ?? '/', 'http://operator').pathname}`;
    const em = unitOfWork(db.orm);
    if (route === 'GET /invite-codes') return { status: 200, body: await listInviteCodes(em) };
    if (route === 'POST /invite-codes') {
      const input = await readJson(req);
      const created = await createInviteCode(em, { uses: input.uses, expiresInDays: input.expires_in_days });
      logger.info({ id: created.id, hint: created.hint }, 'invite code created by operator');
      return { status: 201, body: created };
    }
    const links = LINKS[route];
    if (links) {
      const { username } = await readJson(req);
      if (typeof username !== 'string') throw new HttpError(400, 'username must be a string');
      const link = await links.make(em, username);
      logger.info(`${links.what} made by operator`);
      return { status: 201, body: { link } };
    }
    throw new HttpError(404, 'not found');
  }

  try {
    server.listen(place.socket);
    await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  } catch (err) {
    await place.remove();
    throw err;
  }

  // Written aside and renamed, so the file is never seen half-written nor with wider permissions.
  const file = operatorFilePath(dataDir);
  const draft = `${file}.${process.pid}`;
  const content: OperatorFile = { pid: process.pid, host: hostname(), socket: place.socket };
  await writeFile(draft, JSON.stringify(content), { mode: 0o600 });
  await rename(draft, file);
  logger.info({ socket: place.socket }, 'operator channel listening');

  let closing: Promise<void> | undefined;
  return {
    close: () =>
      (closing ??= (async () => {
        await unlink(file).catch(() => undefined);
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await place.remove();
      })()),
  };
}

/**
 * Where the channel's socket goes: `<dataDir>/operator.sock`, or, when that path is too long for a
 * socket, a new folder of the system's temporary one, which mkdtemp makes 0700.
 */
async function socketPlace(dataDir: string): Promise<{ socket: string; remove(): Promise<void> }> {
  const inDataDir = path.join(dataDir, 'operator.sock');
  if (Buffer.byteLength(inDataDir) <= MAX_SOCKET_PATH_BYTES) {
    // The service holds the data folder's lock: a socket already there was left by one that died.
    await unlink(inDataDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    return { socket: inDataDir, remove: () => unlink(inDataDir).catch(() => undefined) };
  }
  const folder = await mkdtemp(path.join(tmpdir(), 'signalboard-operator-'));
  const socket = path.join(folder, 'operator.sock');
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH_BYTES) {
    await rm(folder, { recursive: true, force: true });
    throw new Error(
      `no place for the operator socket: ${inDataDir} and ${socket} are both longer than a Unix socket path may be ` +
        `(${MAX_SOCKET_PATH_BYTES} bytes); set DATA_DIR or TMPDIR to a shorter path`,
    );
  }
  return { socket, remove: () => rm(folder, { recursive: true, force: true }) };
}

async function readJson(req: IncomingMessage): Promise<{ uses?: number; expires_in_days?: number; username?: unknown }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, 'body too large');
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = size === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'body must be a JSON object');
  return body;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
}
