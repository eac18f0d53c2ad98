/**
 * The two ceilings the service is measured against, each run as a process of its own, like the
 * service, on 127.0.0.1 and a free port (printed as `listening <port>` on stdout).
 *
 *   bare: Koa answering `GET /v1` with the same JSON the service sends. No middleware.
 *   pg:   Koa + `pg`, hand-written: the same authenticated project read as `GET /v1/projects/:namespace`
 *         (session token → SHA-256 → session and user, project by namespace, members with their users,
 *         membership check, feeds) and the same JSON, with no ORM, no contract, no validation.
 *
 * Usage: tsx bench/baseline-server.ts bare|pg [databaseUrl]
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import Koa from 'koa';
import pg from 'pg';

const [mode, databaseUrl] = process.argv.slice(2);
const app = new Koa();

if (mode === 'bare') {
  app.use(async (ctx) => {
    if (ctx.method === 'GET' && ctx.path === '/v1') {
      ctx.body = { success: true, data: { message: 'Hello from Signalboard. The API reference is at /v1/openapi.json.' } };
      return;
    }
    ctx.status = 404;
    ctx.body = { success: false, error: { code: 'not_found', message: 'No route matches this path.' } };
  });
} else if (mode === 'pg') {
  // The service's pool: knex's default of 10 connections.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  const PROJECT = /^\/v1\/projects\/([^/]+)$/;
  const AUTH = /^(?:Bearer|Token) +([A-Za-z0-9_-]{1,200})$/i;
  const fail = (ctx: Koa.Context, status: number, code: string) => {
    ctx.status = status;
    ctx.body = { success: false, error: { code, message: code } };
  };
  app.use(async (ctx) => {
    const match = ctx.method === 'GET' ? PROJECT.exec(ctx.path) : null;
    if (!match) return fail(ctx, 404, 'not_found');
    const token = AUTH.exec(ctx.get('Authorization'))?.[1];
    if (!token) return fail(ctx, 401, 'unauthenticated');
    const tokenHash = createHash('sha256').update(token).digest('hex');
    const {
      rows: [caller],
    } = await pool.query<{ user_id: string }>(
      `select s.user_id from sessions s join users u on u.id = s.user_id where s.token_hash = $1 and s.expires_at > now()`,
      [tokenHash],
    );
    if (!caller) return fail(ctx, 401, 'unauthenticated');
    const {
      rows: [project],
    } = await pool.query<{
      id: string;
      namespace: string;
      name: string;
      icon: string | null;
      tier: number;
      billing_id: string | null;
      created_at: Date;
    }>(`select id, namespace, name, icon, tier, billing_id, created_at from projects where namespace = $1`, [
      decodeURIComponent(match[1]!),
    ]);
    if (!project) return fail(ctx, 404, 'not_found');
    const { rows: members } = await pool.query<{ id: string; username: string; icon: string | null; role: string }>(
      `select u.id, u.username, u.icon, m.role from project_members m join users u on u.id = m.user_id
       where m.project_id = $1 order by (m.role = 'owner') desc, m.created_at`,
      [project.id],
    );
    if (!members.some((m) => m.id === caller.user_id)) return fail(ctx, 404, 'not_found');
    const { rows: feeds } = await pool.query<{ id: string; name: string; description: string | null; emoji: string | null; type: number }>(
      `select id, name, description, emoji, type from feeds where project_id = $1 order by created_at`,
      [project.id],
    );
    const icon = (sha: string | null) => (sha ? `http://localhost/cdn/icons/${sha}.png` : null);
    ctx.body = {
      success: true,
      data: {
        id: project.id,
        namespace: project.namespace,
        name: project.name,
        icon: icon(project.icon),
        tier: project.tier,
        billing_id: project.billing_id,
        feeds,
        members: members.map((m) => ({ id: m.id, username: m.username, icon: icon(m.icon), role: m.role })),
        created_at: project.created_at.toISOString(),
      },
    };
  });
} else {
  console.error('usage: baseline-server.ts bare|pg [databaseUrl]');
  process.exit(2);
}

const handle = app.callback();
// Koa answers every request itself, errors included: the promise it returns never rejects.
const server = http.createServer((req, res) => void handle(req, res));
// The service's settings (server.ts).
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.BENCH_PORT ?? 0), '127.0.0.1', () => console.log(`listening ${(server.address() as AddressInfo).port}`));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
