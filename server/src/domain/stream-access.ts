/**
 * Whether the viewers of open event streams may still see them: still a member of the project, and
 * the credential that opened the stream still exists and has not expired. Asked for every open
 * stream of an instance at once, in one statement, however many streams there are: checking each
 * stream on its own made every heartbeat a burst of queries that slowed everyone else's requests.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../db/raw.js';
import type { CredentialKind } from './credentials.js';

export interface StreamViewer {
  projectId: string;
  userId: string;
  credentialId: string;
  credentialKind: CredentialKind;
}

const STILL_ALLOWED = `
  select v.i from unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::text[]) with ordinality as v(project_id, user_id, credential_id, kind, i)
  where exists (select 1 from project_members m where m.project_id = v.project_id and m.user_id = v.user_id)
    and (exists (select 1 from sessions s where v.kind = 'session' and s.id = v.credential_id and s.expires_at > now())
      or exists (select 1 from api_tokens t where v.kind = 'api' and t.id = v.credential_id and (t.expires_at is null or t.expires_at > now())))`;

/** For each viewer, in order: may it keep its stream? */
export async function viewersStillAllowed(em: EntityManager, viewers: StreamViewer[]): Promise<boolean[]> {
  if (viewers.length === 0) return [];
  const rows = await query<{ i: string }>(em, STILL_ALLOWED, [
    viewers.map((v) => v.projectId),
    viewers.map((v) => v.userId),
    viewers.map((v) => v.credentialId),
    viewers.map((v) => v.credentialKind),
  ]);
  const allowed = new Set(rows.map((row) => Number(row.i) - 1));
  return viewers.map((_, i) => allowed.has(i));
}
