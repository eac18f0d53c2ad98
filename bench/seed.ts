/**
 * The bench's database: a fresh `sb_bench_<ts>` next to the admin URL's database, and realistic data
 * written fast with direct SQL (bulk `insert … select * from unnest(…)`), after the service's own
 * migrations have created the schema. Ids are UUID v7 made here, in order, with `created_at` taken
 * from the same clock, so cursor pages and "newest first" behave as with rows the service wrote.
 */
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import bcrypt from 'bcryptjs';

/** UUID v7 strings in strictly increasing order; `at` is the millisecond each one carries. */
export class OrderedIds {
  private ms: number;
  constructor(start: number) {
    this.ms = start;
  }
  next(): { id: string; at: Date } {
    this.ms += 1;
    const random = randomBytes(10).toString('hex');
    // 48 bits of milliseconds, version 7, 12 random bits, variant 10xx, 62 random bits.
    const variant = ((parseInt(random[3]!, 16) & 0x3) | 0x8).toString(16);
    const h = this.ms.toString(16).padStart(12, '0') + '7' + random.slice(0, 3) + variant + random.slice(4, 19);
    return { id: `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`, at: new Date(this.ms) };
  }
}

export interface SeedSpec {
  users: number;
  projects: number;
  membersPerProject: number;
  feedsPerProject: number;
  insightsPerProject: number;
  /** Activity records on the largest project (projects[0]). */
  largestActivity: number;
  /** Two extra projects for the "page cost is independent of the log's length" figure. */
  smallLog: number;
  hugeLog: number;
}

export const DEFAULT_SPEC: SeedSpec = {
  users: 1_000,
  projects: 200,
  membersPerProject: 20,
  feedsPerProject: 5,
  insightsPerProject: 50,
  largestActivity: 10_000,
  smallLog: 1_000,
  hugeLog: 100_000,
};

export interface SeededProject {
  id: string;
  namespace: string;
  /** Indexes into `users`; [0] is the owner. */
  members: number[];
}

export interface Fixture {
  password: string;
  bcryptRounds: number;
  users: { id: string; username: string }[];
  projects: SeededProject[];
  /** projects[0]: 20 members, 5 feeds, 50 insights, `largestActivity` records. */
  largest: SeededProject;
  smallLog: SeededProject;
  hugeLog: SeededProject;
  /** An otherwise quiet project for the stream-latency figure. */
  stream: SeededProject;
  /** Unused single-use invite codes, for the sign-up burst. */
  invites: string[];
  counts: Record<string, number>;
  ms: number;
}

async function insert(client: pg.Client, table: string, columns: [string, string][], rows: unknown[][]): Promise<void> {
  const CHUNK = 10_000;
  for (let start = 0; start < rows.length; start += CHUNK) {
    const chunk = rows.slice(start, start + CHUNK);
    const arrays = columns.map((_, c) => chunk.map((row) => row[c]));
    const sql = `insert into ${table} (${columns.map(([name]) => name).join(', ')})
      select * from unnest(${columns.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ')})`;
    await client.query(sql, arrays);
  }
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
function inviteCode(): string {
  return `inv_${[...randomBytes(26)].map((b) => BASE32[b & 31]).join('')}`;
}

/** Fills a migrated database. One bcrypt hash, computed once, serves every account. */
export async function seed(url: string, spec: SeedSpec = DEFAULT_SPEC, bcryptRounds = 10): Promise<Fixture> {
  const started = performance.now();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const ids = new OrderedIds(Date.now() - 3 * 24 * 3600 * 1000);
  const password = 'bench password, not a secret';
  const passwordHash = bcrypt.hashSync(password, bcryptRounds);
  const counts: Record<string, number> = {};
  try {
    await client.query('begin');
    const users = Array.from({ length: spec.users }, (_, i) => ({ ...ids.next(), username: `bench_user_${String(i).padStart(4, '0')}` }));
    await insert(
      client,
      'users',
      [
        ['id', 'uuid'],
        ['username', 'text'],
        ['email', 'text'],
        ['password_hash', 'text'],
        ['icon', 'text'],
        ['created_at', 'timestamptz'],
        ['updated_at', 'timestamptz'],
      ],
      users.map((u) => [u.id, u.username, `${u.username}@bench.example.com`, passwordHash, null, u.at, u.at]),
    );
    counts.users = users.length;

    const projectCount = spec.projects + 3;
    const projects: (SeededProject & { at: Date })[] = [];
    for (let p = 0; p < projectCount; p++) {
      const { id, at } = ids.next();
      const namespace =
        p < spec.projects
          ? `bench-${String(p).padStart(3, '0')}`
          : ['bench-small-log', 'bench-huge-log', 'bench-stream'][p - spec.projects]!;
      // Owners are spread over the users; members follow the owner, wrapping around.
      const members = Array.from({ length: spec.membersPerProject }, (_, k) => (p * 7 + k * 37) % spec.users);
      projects.push({ id, namespace, members: [...new Set(members)], at });
    }
    await insert(
      client,
      'projects',
      [
        ['id', 'uuid'],
        ['namespace', 'text'],
        ['name', 'text'],
        ['icon', 'bpchar'],
        ['tier', 'int4'],
        ['billing_id', 'text'],
        ['created_at', 'timestamptz'],
        ['updated_at', 'timestamptz'],
      ],
      projects.map((p) => [p.id, p.namespace, `Project ${p.namespace}`, null, 0, null, p.at, p.at]),
    );
    counts.projects = projects.length;

    const memberRows: unknown[][] = [];
    const feedRows: unknown[][] = [];
    const insightRows: unknown[][] = [];
    for (const project of projects) {
      project.members.forEach((u, k) => {
        const { id, at } = ids.next();
        memberRows.push([id, project.id, users[u]!.id, k === 0 ? 'owner' : 'member', at]);
      });
      for (let f = 0; f < spec.feedsPerProject; f++) {
        const { id, at } = ids.next();
        feedRows.push([
          id,
          project.id,
          f === 0 ? 'general' : `feed-${f}`,
          f === 0 ? null : `Feed number ${f}`,
          f === 0 ? null : '📈',
          f % 3,
          at,
        ]);
      }
      for (let i = 0; i < spec.insightsPerProject; i++) {
        const { id, at } = ids.next();
        insightRows.push([
          id,
          project.id,
          `Insight ${i}`,
          JSON.stringify(i % 3 === 0 ? i * 10 : i % 3 === 1 ? `value ${i}` : i % 2 === 0),
          i % 4 === 0 ? '💡' : null,
          at,
          at,
        ]);
      }
    }
    await insert(
      client,
      'project_members',
      [
        ['id', 'uuid'],
        ['project_id', 'uuid'],
        ['user_id', 'uuid'],
        ['role', 'text'],
        ['created_at', 'timestamptz'],
      ],
      memberRows,
    );
    await insert(
      client,
      'feeds',
      [
        ['id', 'uuid'],
        ['project_id', 'uuid'],
        ['name', 'text'],
        ['description', 'text'],
        ['emoji', 'text'],
        ['type', 'int4'],
        ['created_at', 'timestamptz'],
      ],
      feedRows,
    );
    await insert(
      client,
      'insights',
      [
        ['id', 'uuid'],
        ['project_id', 'uuid'],
        ['title', 'text'],
        ['value', 'jsonb'],
        ['emoji', 'text'],
        ['created_at', 'timestamptz'],
        ['updated_at', 'timestamptz'],
      ],
      insightRows,
    );
    counts.project_members = memberRows.length;
    counts.feeds = feedRows.length;
    counts.insights = insightRows.length;

    // Activity: a realistic mix of types and payloads, actors among the project's members.
    const [largest, , ,] = projects;
    const smallLog = projects[spec.projects]!;
    const hugeLog = projects[spec.projects + 1]!;
    const logs: [SeededProject, number][] = [
      [largest!, spec.largestActivity],
      [smallLog, spec.smallLog],
      [hugeLog, spec.hugeLog],
    ];
    // The other projects get a short log each, as they would have from being created and used.
    for (const project of projects.slice(1, spec.projects)) logs.push([project, 20]);
    const types = ['insight.created', 'insight.updated', 'project.updated', 'member.joined', 'feed.created'];
    let activity = 0;
    for (const [project, n] of logs) {
      const rows: unknown[][] = [];
      for (let i = 0; i < n; i++) {
        const { id, at } = ids.next();
        const type = types[i % types.length]!;
        const actor = users[project.members[i % project.members.length]!]!.id;
        rows.push([id, project.id, type, actor, JSON.stringify({ insight_id: id, title: `Insight ${i % 50}`, fields: ['value'] }), at]);
      }
      await insert(
        client,
        'activity',
        [
          ['id', 'uuid'],
          ['project_id', 'uuid'],
          ['type', 'text'],
          ['actor_id', 'uuid'],
          ['data', 'jsonb'],
          ['created_at', 'timestamptz'],
        ],
        rows,
      );
      activity += rows.length;
    }
    counts.activity = activity;

    const invites = Array.from({ length: 100 }, inviteCode);
    await insert(
      client,
      'invite_codes',
      [
        ['id', 'uuid'],
        ['code_hash', 'bpchar'],
        ['hint', 'text'],
        ['uses_total', 'int4'],
        ['uses_left', 'int4'],
        ['expires_at', 'timestamptz'],
        ['created_at', 'timestamptz'],
      ],
      invites.map((code) => {
        const { id, at } = ids.next();
        return [id, createHash('sha256').update(code).digest('hex'), code.slice(0, 8), 1, 1, null, at];
      }),
    );
    await client.query('commit');
    await client.query('analyze');
    return {
      password,
      bcryptRounds,
      users: users.map(({ id, username }) => ({ id, username })),
      projects: projects.slice(0, spec.projects),
      largest: largest!,
      smallLog,
      hugeLog,
      stream: projects[spec.projects + 2]!,
      invites,
      counts,
      ms: Math.round(performance.now() - started),
    };
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    await client.end();
  }
}
