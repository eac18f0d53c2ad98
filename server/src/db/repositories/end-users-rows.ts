/**
 * A project's end users (`end_users`): the properties the publisher recorded for them, and their
 * first and last event and number of events, which the insert of events keeps up
 * (db/repositories/events-rows.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TagValue } from '../entities.js';
import { query } from '../raw.js';
import { rowReader, time } from '../columns.js';

export interface EndUserRow {
  userId: string;
  properties: Record<string, TagValue>;
  firstSeen: Date | null;
  lastSeen: Date | null;
  eventCount: number;
}

const END_USER = rowReader<EndUserRow>({
  userId: 'user_id',
  properties: 'properties',
  firstSeen: time('first_seen'),
  lastSeen: time('last_seen'),
  eventCount: 'event_count::float8',
});

/** The project's end user `userId`, or undefined when neither recorded nor seen in an event. */
export async function findEndUser(em: EntityManager, projectId: string, userId: string): Promise<EndUserRow | undefined> {
  const [row] = await query(em, `select ${END_USER.select} from end_users where project_id = ? and user_id = ?`, [projectId, userId]);
  return row && END_USER.read(row);
}

/**
 * Merges `properties` into the end user's (a key given replaces the one stored), creating the end
 * user when new; undefined, changing nothing, when the merge would hold more than `maxKeys` keys.
 * One statement: concurrent merges of one end user queue on its row and each sees the one before.
 */
export async function mergeEndUserProperties(
  tx: EntityManager,
  projectId: string,
  userId: string,
  properties: Record<string, TagValue>,
  maxKeys: number,
): Promise<EndUserRow | undefined> {
  const json = JSON.stringify(properties);
  const [row] = await query(
    tx,
    `insert into end_users as u (project_id, user_id, properties) select ?, ?, ?::jsonb
     where (select count(*) from jsonb_object_keys(?::jsonb)) <= ?
     on conflict (project_id, user_id) do update set properties = u.properties || excluded.properties
     where (select count(*) from jsonb_object_keys(u.properties || excluded.properties)) <= ?
     returning ${END_USER.select}`,
    [projectId, userId, json, json, maxKeys, maxKeys],
  );
  return row && END_USER.read(row);
}
