/** The project's append-only log. Records are written with the change they describe, in its transaction. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Project, User } from '../db/entities.js';
import { decodeCursor, type PageRequest } from '../db/page.js';
import { activityPage, addActivityRecord, type ActivityRow } from '../db/repositories/activity-rows.js';
import type { Scope } from './scope.js';

export type { ActivityRow };

export type ActivityType =
  | 'project.created'
  | 'project.updated'
  | 'member.joined'
  | 'member.removed'
  | 'member.left'
  | 'invite.created'
  | 'invite.revoked'
  | 'invite.declined'
  | 'insight.created'
  | 'insight.updated'
  | 'insight.deleted'
  | 'feed.created'
  | 'feed.updated'
  | 'feed.deleted'
  | 'billing.changed'
  | 'project.owner_changed'
  | 'webhook.created'
  | 'webhook.updated'
  | 'webhook.deleted'
  | 'webhook.disabled';

/** A record of the project's log: what changed (`type`, `data`), and who changed it (null: the service). */
export interface ActivityEntry {
  project: Project;
  actor: User | null;
  type: ActivityType;
  data: Record<string, unknown>;
}

/**
 * Adds a record to the unit of work of `em`: it is written by that transaction's flush (every
 * transaction flushes before it commits), or not at all.
 */
export function recordActivity(em: EntityManager, entry: ActivityEntry): void {
  addActivityRecord(em, entry);
}

/** A project's log as its members read it. Records are written by the modules that make the changes (`recordActivity`). */
export class Activity {
  /** A page of the project's log, newest first, each record with its actor; the cursor's page costs the same at any depth. */
  list({ em }: Scope, projectId: string, page: PageRequest): Promise<ActivityRow[]> {
    return activityPage(em, projectId, decodeCursor(page.cursor), page.limit + 1);
  }
}
