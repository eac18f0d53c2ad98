/**
 * Helpers for the project-route tests: unique namespaces, JSON calls with a token, the common setup
 * steps (a project, an invite, a member, an API token), exact error-envelope checks, cursor walks
 * and direct reads of what the database holds for a project.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { baseUrl, client, http, secret, sql, uniqueName } from './harness.js';

/** A namespace no other test uses: matches ^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$. */
export function namespaceName(prefix = 'p'): string {
  const name = uniqueName(prefix).toLowerCase().replace(/_/g, '-');
  if (!/^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$/.test(name)) throw new Error(`namespaceName made an invalid namespace: ${name}`);
  return name;
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** A JSON call with an optional session or API token; `body` is serialised when present. */
export async function call(method: string, path: string, token?: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return http(method, path, {
    headers: {
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
}

/** The failure envelope, exactly: status, code, a message, and details only on invalid_request. */
export function expectError(answer: Answer, status: number, code: string, what = ''): void {
  const label = `${what} ${answer.status} ${answer.text}`.trim();
  expect(answer.status, label).to.equal(status);
  expect(answer.json, label).to.be.an('object');
  expect(Object.keys(answer.json).sort(), label).to.deep.equal(['error', 'success']);
  expect(answer.json.success, label).to.equal(false);
  expect(answer.json.error.code, label).to.equal(code);
  expect(answer.json.error.message, label).to.be.a('string').and.not.equal('');
  const keys = Object.keys(answer.json.error).sort();
  if (code === 'invalid_request') expect(keys, label).to.deep.equal(['code', 'details', 'message']);
  else expect(keys, label).to.deep.equal(['code', 'message']);
  if (status === 401) expect(answer.headers.get('www-authenticate'), label).to.match(/^Bearer\b/);
}

/** A 400 invalid_request whose details point at `path` (a JSON pointer such as /body/namespace). */
export function expectInvalid(answer: Answer, path: string, what = ''): void {
  expectError(answer, 400, 'invalid_request', what);
  const paths = (answer.json.error.details as { path: string; message: string }[]).map((d) => d.path);
  expect(paths, `${what} ${answer.text}`).to.include(path);
}

/** A 200/201 success envelope; answers its data. */
export function expectData(answer: Answer, status: 200 | 201 = 200, what = ''): any {
  const label = `${what} ${answer.status} ${answer.text}`.trim();
  expect(answer.status, label).to.equal(status);
  expect(Object.keys(answer.json ?? {}).sort(), label).to.deep.equal(['data', 'success']);
  expect(answer.json.success, label).to.equal(true);
  return answer.json.data;
}

/** A 204 with no body. */
export function expectNoContent(answer: Answer, what = ''): void {
  expect(answer.status, `${what} ${answer.status} ${answer.text}`.trim()).to.equal(204);
  expect(answer.text).to.equal('');
}

export function projectPath(namespace: string, rest = ''): string {
  return `/v1/projects/${namespace}${rest}`;
}

/** A new project owned by the token's user (201 asserted). */
export async function createProject(token: string, body: { name?: string; namespace?: string; icon?: string } = {}): Promise<any> {
  const answer = await call('POST', '/v1/projects', token, { name: body.name ?? 'Test project', namespace: body.namespace ?? namespaceName(), ...body });
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

export async function createInsight(token: string, namespace: string, body: { title: string; value: unknown; emoji?: string | null }): Promise<any> {
  return expectData(await call('POST', projectPath(namespace, '/insights'), token, body), 201, 'create insight');
}

/** An API token of the session's user. */
export async function apiToken(sessionToken: string): Promise<string> {
  const { data, error, response } = await client(sessionToken).POST('/v1/auth/tokens', { body: { name: 'project tests' } });
  if (!data) throw new Error(`API token creation failed: ${response.status} ${JSON.stringify(error)}`);
  return secret(data.data.token);
}

/** Follows next_cursor from the first page to the last; answers every page's items in order, and the page sizes. */
export async function walk(token: string, path: string, limit: number): Promise<{ items: any[]; pages: number[] }> {
  const items: any[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  for (let guard = 0; guard < 1000; guard++) {
    const query: string = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = expectData(await call('GET', path + query, token), 200, `page ${pages.length + 1} of ${path}`);
    expect(Object.keys(page).sort()).to.deep.equal(['items', 'next_cursor']);
    expect(page.items.length).to.be.at.most(limit);
    items.push(...page.items);
    pages.push(page.items.length);
    cursor = page.next_cursor;
    if (cursor === null) return { items, pages };
    expect(cursor).to.be.a('string').and.not.equal('');
  }
  throw new Error(`no last page after 1000 pages of ${path}`);
}

/** Rows of every table that hangs off a project, by the project's id. */
export async function rowsOfProject(projectId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  counts.projects = await count('select count(*)::int as n from projects where id = ?', [projectId]);
  for (const table of ['project_members', 'feeds', 'project_invites', 'insights', 'activity']) {
    counts[table] = await count(`select count(*)::int as n from ${table} where project_id = ?`, [projectId]);
  }
  return counts;
}

export async function count(text: string, params: unknown[] = []): Promise<number> {
  const [row] = await sql<{ n: number }>(text, params);
  return Number(row!.n);
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

export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
export const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
