/**
 * Whether the viewers of open event streams may still see them, all in one statement however many
 * there are: still a member of the project, and the credential that opened the stream still
 * exists and has not expired.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';
import type { CredentialKind } from './credentials.js';

/** Who watches a project's stream, through which credential. */
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
      or exists (select 1 from api_tokens t
                 where v.kind = 'api' and t.id = v.credential_id and (t.expires_at is null or t.expires_at > now())))`;

/** The positions (from 0) in `viewers` of those still allowed. */
export async function viewersStillAllowed(em: EntityManager, viewers: readonly StreamViewer[]): Promise<Set<number>> {
  const rows = await query<{ i: string }>(em, STILL_ALLOWED, [
    viewers.map((v) => v.projectId),
    viewers.map((v) => v.userId),
    viewers.map((v) => v.credentialId),
    viewers.map((v) => v.credentialKind),
  ]);
  return new Set(rows.map((row) => Number(row.i) - 1));
}
