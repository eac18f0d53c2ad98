/**
 * The ceilings the service is measured against, each run as a process of its own, like the
 * service, on 127.0.0.1 and a free port (printed as `listening <port>` on stdout).
 *
 *   bare: Koa answering `GET /v1` with the same JSON the service sends. No middleware.
 *   headers: the same, with the headers the service's answer carries (the `GET /v1` target is
 *         against `bare`; this one says how much of the difference is the answer itself).
 *   hooks: `headers` in a process whose async-context hooks are on, as the service's are once
 *         MikroORM has run its first transaction or flush in its AsyncLocalStorage: on Node 20 and
 *         22, every promise, tick and socket write then calls the hooks. With `headers`, what an
 *         answer of the service costs before any of the pipeline's own work (routing, validation,
 *         the envelope, the tag's hash, the request line). Node 24 keeps async context without
 *         hooks, so there it is `headers` again.
 *   pg:   Koa + `pg`, hand-written, with no ORM, no contract, no validation beyond what the statements
 *         need, answering the same JSON as the service:
 *         - `GET /v1/projects/:namespace`: the authenticated project read (session token → SHA-256 →
 *           session and user, project by namespace, members with their users, membership check, feeds);
 *         - `POST /v1/projects/:namespace/feeds/:feed/events`: an ingest of one event (the caller, the
 *           project with the caller's membership, the feed, one insert with a fresh UUID v7 that also
 *           writes the event's counts and its end user, as the service's insert does), on the
 *           service's tables and indexes but with no ordering of ids across publishers;
 *         - `PATCH /v1/projects/:namespace/insights/:id` with `{ "increment": n }`: the caller, the
 *           project with its membership, and one `update … set value = value + n`.
 *
 * Usage: tsx bench/baseline-server.ts bare|headers|hooks|pg [databaseUrl]
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomUUID } from 'node:crypto';
import Koa from 'koa';
import pg from 'pg';
import { v7 } from 'uuid';

const [mode, databaseUrl] = process.argv.slice(2);
const app = new Koa();

if (mode === 'bare' || mode === 'headers' || mode === 'hooks') {
  const headers = mode !== 'bare';
  // What MikroORM does at its first flush (UnitOfWork's `insideFlush.run`): the process's hooks stay on from then on.
  if (mode === 'hooks') await new AsyncLocalStorage<boolean>().run(true, () => Promise.resolve());
  const root = {
    success: true,
    data: {
      message: 'Hello from Signalboard. The API reference is at /docs, its contract at /v1/openapi.json.',
      webhooks: { disable_after_seconds: 259_200, max_pending_deliveries: 10_000 },
    },
  };
  // `headers`: the same answer with the headers the service's carries (a request id, the security
  // headers, its strong tag and Cache-Control), set as the service sets them but with nothing
  // computed per request beyond the id: the answer's own cost, without the pipeline that makes it.
  const tag = `"${createHash('sha256').update(JSON.stringify(root)).digest('base64url').slice(0, 22)}"`;
  const SECURITY: [string, string][] = [
    ['X-Content-Type-Options', 'nosniff'],
    ['X-Frame-Options', 'DENY'],
    ['Referrer-Policy', 'no-referrer'],
    ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
    ['Cross-Origin-Resource-Policy', 'same-site'],
  ];
  app.use(async (ctx) => {
    if (headers) {
      ctx.res.setHeader('X-Request-Id', randomUUID());
      for (const [name, value] of SECURITY) ctx.res.setHeader(name, value);
    }
    if (ctx.method === 'GET' && ctx.path === '/v1') {
      ctx.body = root;
      if (headers) ctx.set({ ETag: tag, 'Cache-Control': 'private, no-cache' });
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
  const EVENTS = /^\/v1\/projects\/([^/]+)\/feeds\/([^/]+)\/events$/;
  const INSIGHT = /^\/v1\/projects\/([^/]+)\/insights\/([^/]+)$/;
  /** The caller's user id, or undefined (401). */
  const callerOf = async (ctx: Koa.Context): Promise<string | undefined> => {
    const token = AUTH.exec(ctx.get('Authorization'))?.[1];
    if (!token) return undefined;
    const tokenHash = createHash('sha256').update(token).digest('hex');
    const { rows } = await pool.query<{ user_id: string }>(
      `select s.user_id from sessions s join users u on u.id = s.user_id where s.token_hash = $1 and s.expires_at > now()`,
      [tokenHash],
    );
    return rows[0]?.user_id;
  };
  /** The id of the project `namespace` names, if `userId` is a member of it. */
  const memberProject = async (namespace: string, userId: string): Promise<string | undefined> => {
    const { rows } = await pool.query<{ id: string }>(
      `select p.id from projects p join project_members m on m.project_id = p.id and m.user_id = $2 where p.namespace = $1`,
      [namespace, userId],
    );
    return rows[0]?.id;
  };
  const jsonBody = async (ctx: Koa.Context): Promise<Record<string, unknown>> => {
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  };
  const ingest = async (ctx: Koa.Context, namespace: string, feedName: string) => {
    const userId = await callerOf(ctx);
    if (!userId) return fail(ctx, 401, 'unauthenticated');
    const body = await jsonBody(ctx);
    if (typeof body.event !== 'string') return fail(ctx, 400, 'invalid_request');
    const projectId = await memberProject(namespace, userId);
    if (!projectId) return fail(ctx, 404, 'not_found');
    const {
      rows: [feed],
    } = await pool.query<{ id: string }>(`select id from feeds where project_id = $1 and name = $2`, [projectId, feedName]);
    if (!feed) return fail(ctx, 404, 'not_found');
    const now = new Date();
    const {
      rows: [event],
    } = await pool.query<{ id: string; event: string; description: string | null; emoji: string | null; tags: unknown; timestamp: Date }>(
      // The event, and in the same statement what the service keeps with it: its counts per minute,
      // quarter hour, hour and UTC day, and its end user's first and last event and number of events.
      `with inserted as (
         insert into events (id, project_id, feed_id, event, description, emoji, tags, user_id, notify, timestamp, created_at)
         values ($1, $2, $3, $4, $5, $6, $7, $9, $10, $8, $8)
         returning id, project_id, feed_id, event, description, emoji, tags, user_id, notify, timestamp
       ), counted as (
         insert into event_counts as c (project_id, span, start, feed_id, count)
         select i.project_id, s.span, to_timestamp(floor(extract(epoch from i.timestamp) / s.span) * s.span), i.feed_id, 1
         from inserted i cross join (values (60), (900), (3600), (86400)) as s(span)
         on conflict (project_id, span, start, feed_id) do update set count = c.count + 1
       ), seen as (
         insert into end_users as u (project_id, user_id, first_seen, last_seen, event_count)
         select i.project_id, i.user_id, i.timestamp, i.timestamp, 1 from inserted i where i.user_id is not null
         on conflict (project_id, user_id) do update set
           first_seen = least(u.first_seen, excluded.first_seen), last_seen = greatest(u.last_seen, excluded.last_seen),
           event_count = u.event_count + 1
       )
       select id, event, description, emoji, tags, user_id, notify, timestamp from inserted`,
      [
        v7(),
        projectId,
        feed.id,
        body.event,
        body.description ?? null,
        body.emoji ?? null,
        JSON.stringify(body.tags ?? {}),
        now,
        body.user_id ?? null,
        body.notify ?? false,
      ],
    );
    ctx.status = 201;
    ctx.body = { success: true, data: { ...event!, feed: feedName, timestamp: event!.timestamp.toISOString() } };
  };
  const increment = async (ctx: Koa.Context, namespace: string, insightId: string) => {
    const userId = await callerOf(ctx);
    if (!userId) return fail(ctx, 401, 'unauthenticated');
    const body = await jsonBody(ctx);
    if (typeof body.increment !== 'number') return fail(ctx, 400, 'invalid_request');
    const projectId = await memberProject(namespace, userId);
    if (!projectId) return fail(ctx, 404, 'not_found');
    const {
      rows: [insight],
    } = await pool.query<{ id: string; title: string; value: unknown; emoji: string | null; created_at: Date; updated_at: Date }>(
      `update insights set value = to_jsonb((value #>> '{}')::numeric + $1::numeric), updated_at = now()
       where id = $2 and project_id = $3 and jsonb_typeof(value) = 'number'
       returning id, title, value, emoji, created_at, updated_at`,
      [body.increment, insightId, projectId],
    );
    if (!insight) return fail(ctx, 404, 'not_found');
    ctx.body = {
      success: true,
      data: { ...insight, created_at: insight.created_at.toISOString(), updated_at: insight.updated_at.toISOString() },
    };
  };
  app.use(async (ctx) => {
    const events = ctx.method === 'POST' ? EVENTS.exec(ctx.path) : null;
    if (events) return ingest(ctx, decodeURIComponent(events[1]!), decodeURIComponent(events[2]!));
    const insight = ctx.method === 'PATCH' ? INSIGHT.exec(ctx.path) : null;
    if (insight) return increment(ctx, decodeURIComponent(insight[1]!), insight[2]!);
    const match = ctx.method === 'GET' ? PROJECT.exec(ctx.path) : null;
    if (!match) return fail(ctx, 404, 'not_found');
    const userId = await callerOf(ctx);
    if (!userId) return fail(ctx, 401, 'unauthenticated');
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
    if (!members.some((m) => m.id === userId)) return fail(ctx, 404, 'not_found');
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
  console.error('usage: baseline-server.ts bare|headers|hooks|pg [databaseUrl]');
  process.exit(2);
}

const handle = app.callback();
// Koa answers every request itself, errors included: the promise it returns never rejects.
const server = http.createServer((req, res) => void handle(req, res));
// The service's settings (server.ts).
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.BENCH_PORT ?? 0), '127.0.0.1', () => console.log(`listening ${(server.address() as AddressInfo).port}`));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
