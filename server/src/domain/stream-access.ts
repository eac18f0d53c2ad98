/**
 * Whether the viewers of open event streams may still see them: still a member of the project, and
 * the credential that opened the stream still exists and has not expired. Asked for every open
 * stream of an instance at once, in one statement, however many streams there are: checking each
 * stream on its own would make every heartbeat a burst of queries that slows everyone else's requests.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { viewersStillAllowedAmong, type StreamViewer } from '../db/repositories/projects-rows.js';

export type { StreamViewer };

/** For each viewer, in order: may it keep its stream? */
export async function viewersStillAllowed(em: EntityManager, viewers: StreamViewer[]): Promise<boolean[]> {
  if (viewers.length === 0) return [];
  const allowed = await viewersStillAllowedAmong(em, viewers);
  return viewers.map((_, i) => allowed.has(i));
}
