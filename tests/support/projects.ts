/**
 * Projects for the tests: unique namespaces, the common set-up steps through the API (a project, an
 * invite and its acceptance, a member, an insight), how a member and an icon look on the wire, and
 * what the database holds for a project.
 */
import { expect } from 'chai';
import type { RunningServer } from '../../server/src/server.js';
import { baseUrl, count, database, sql } from './harness.js';
import { uniqueName } from './accounts.js';
import { call, callAt, expectData } from './http.js';

/** A namespace no other test uses: matches ^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$. */
export function namespaceName(prefix = 'p'): string {
  const name = uniqueName(prefix).toLowerCase().replace(/_/g, '-');
  if (!/^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$/.test(name)) throw new Error(`namespaceName made an invalid namespace: ${name}`);
  return name;
}

export function projectPath(namespace: string, rest = ''): string {
  return `/v1/projects/${namespace}${rest}`;
}

/** A new project owned by the token's user (201 asserted), on the run's server or the one at `origin`. */
export async function createProject(
  token: string,
  body: { name?: string; namespace?: string; icon?: string } = {},
  origin = baseUrl(),
): Promise<any> {
  const answer = await callAt(origin, 'POST', '/v1/projects', token, {
    name: body.name ?? 'Test project',
    namespace: body.namespace ?? namespaceName(),
    ...body,
  });
  return expectData(answer, 201, 'create project');
}

export async function invite(ownerToken: string, namespace: string, username: string): Promise<any> {
  return expectData(await call('POST', projectPath(namespace, '/invites'), ownerToken, { username }), 201, 'invite');
}

export async function accept(inviteeToken: string, namespace: string, username: string): Promise<any> {
  return expectData(await call('PUT', projectPath(namespace, `/invites/${username}`), inviteeToken), 200, 'accept');
}

/** Invites the user and has it accept: it is a member afterwards. */
export async function addMember(ownerToken: string, namespace: string, user: { username: string; token: string }): Promise<void> {
  await invite(ownerToken, namespace, user.username);
  await accept(user.token, namespace, user.username);
}

export async function createInsight(
  token: string,
  namespace: string,
  body: { title: string; value: unknown; emoji?: string | null },
): Promise<any> {
  return expectData(await call('POST', projectPath(namespace, '/insights'), token, body), 201, 'create insight');
}

/** Row counts of the project and of every table that hangs off it (found from the schema, so new tables count too). */
export async function rowsOfProject(projectId: string, db: RunningServer['db'] = database()): Promise<Record<string, number>> {
  const tables = await sql<{ table_name: string }>(
    `select table_name from information_schema.columns where table_schema = 'public' and column_name = 'project_id' order by table_name`,
    [],
    db,
  );
  const counts: Record<string, number> = { projects: await count('select count(*)::int from projects where id = ?', [projectId], db) };
  for (const { table_name: table } of tables)
    counts[table] = await count(`select count(*)::int from "${table}" where project_id = ?`, [projectId], db);
  return counts;
}

/** Nothing of the project is left: no row in any table that hangs off it. */
export async function expectNoRowsOfProject(projectId: string): Promise<void> {
  const rows = await rowsOfProject(projectId);
  expect(rows).to.deep.equal(Object.fromEntries(Object.keys(rows).map((table) => [table, 0])));
}

/** The activity records of a project, newest first, straight from the database. */
export async function activityRows(projectId: string): Promise<{ id: string; type: string; actor_id: string | null; data: any }[]> {
  return sql(`select id, type, actor_id, data from activity where project_id = ? order by id desc`, [projectId]);
}

/** The icon address the service shows for a SHA-256 (its own /cdn, as the tests run without CDN_URL). */
export function iconUrl(sha: string): string {
  return `${baseUrl()}/cdn/icons/${sha}.png`;
}

/** Asserts a member as the wire shows it: id, username, icon, and role only where a project is in view; never an email. */
export function member(user: { id: string; username: string }, role?: 'owner' | 'member'): Record<string, unknown> {
  return { id: user.id, username: user.username, icon: null, ...(role ? { role } : {}) };
}
