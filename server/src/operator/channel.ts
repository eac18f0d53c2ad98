import { randomBytes, timingSafeEqual } from 'node:crypto';
import { rename, unlink, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import path from 'node:path';
import type { Database } from '../db/orm.js';
import { createInviteCode, InviteCodeInputError, listInviteCodes } from '../domain/invite-codes.js';
import type { Logger } from '../logger.js';

/** What `<dataDir>/operator.json` holds: how a command on this host reaches the running service. */
export interface OperatorFile {
  pid: number;
  host: string;
  port: number;
  secret: string;
}

export const operatorFilePath = (dataDir: string): string => path.join(dataDir, 'operator.json');

const MAX_BODY_BYTES = 4096;

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
 * (`npm run invite`) ask it over loopback instead. Whoever can read operator.json (mode 0600, so
 * the service's user) holds the secret; nothing else is answered.
 */
export async function startOperatorChannel(db: Database, dataDir: string, logger: Logger): Promise<{ close(): Promise<void> }> {
  const secret = randomBytes(32).toString('hex');
  const expected = Buffer.from(`Bearer ${secret}`);

  const server = createServer((req, res) => {
    handle(req)
      .then(({ status, body }) => send(res, status, body))
      .catch((err: unknown) => {
        if (err instanceof HttpError) return send(res, err.status, { error: err.message });
        if (err instanceof InviteCodeInputError) return send(res, 400, { error: err.message });
        logger.error({ err }, 'operator request failed');
        send(res, 500, { error: 'internal error' });
      });
  });

  async function handle(req: IncomingMessage): Promise<{ status: number; body: unknown }> {
    const given = Buffer.from(req.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new HttpError(401, 'unauthorized');
    const route = `${req.method} ${new URL(req.url ?? '/', 'http://operator').pathname}`;
    const em = db.orm.em.fork();
    if (route === 'GET /invite-codes') return { status: 200, body: await listInviteCodes(em) };
    if (route === 'POST /invite-codes') {
      const input = await readJson(req);
      const created = await createInviteCode(em, { uses: input.uses, expiresInDays: input.expires_in_days });
      logger.info({ id: created.id, hint: created.hint }, 'invite code created by operator');
      return { status: 201, body: created };
    }
    throw new HttpError(404, 'not found');
  }

  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  const { port } = server.address() as AddressInfo;

  // Written aside and renamed, so the file is never seen half-written nor with wider permissions.
  const file = operatorFilePath(dataDir);
  const draft = `${file}.${process.pid}`;
  const content: OperatorFile = { pid: process.pid, host: hostname(), port, secret };
  await writeFile(draft, JSON.stringify(content), { mode: 0o600 });
  await rename(draft, file);
  logger.info({ port }, 'operator channel listening');

  let closing: Promise<void> | undefined;
  return {
    close: () =>
      (closing ??= (async () => {
        await unlink(file).catch(() => undefined);
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })()),
  };
}

async function readJson(req: IncomingMessage): Promise<{ uses?: number; expires_in_days?: number }> {
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
