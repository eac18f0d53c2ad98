/**
 * A project's end users (`end_users`): the properties the publisher recorded for them, and their
 * first and last event and number of events, which the insert of events keeps up
 * (db/repositories/events.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TagValue } from '../entities.js';
import { query } from '../raw.js';

export interface EndUserRow {
  userId: string;
  properties: Record<string, TagValue>;
  firstSeen: Date | null;
  lastSeen: Date | null;
  eventCount: number;
}

interface Row {
  user_id: string;
  properties: Record<string, TagValue>;
  first_seen: string | null;
  last_seen: string | null;
  event_count: number;
}

const COLUMNS =
  "user_id, properties, to_json(first_seen) #>> '{}' as first_seen, to_json(last_seen) #>> '{}' as last_seen, event_count::float8 as event_count";

function endUserRow(row: Row): EndUserRow {
  return {
    userId: row.user_id,
    properties: row.properties,
    firstSeen: row.first_seen === null ? null : new Date(row.first_seen),
    lastSeen: row.last_seen === null ? null : new Date(row.last_seen),
    eventCount: row.event_count,
  };
}

/** The project's end user `userId`, or undefined when neither recorded nor seen in an event. */
export async function findEndUser(em: EntityManager, projectId: string, userId: string): Promise<EndUserRow | undefined> {
  const [row] = await query<Row>(em, `select ${COLUMNS} from end_users where project_id = ? and user_id = ?`, [projectId, userId]);
  return row && endUserRow(row);
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
  const [row] = await query<Row>(
    tx,
    `insert into end_users as u (project_id, user_id, properties) select ?, ?, ?::jsonb
     where (select count(*) from jsonb_object_keys(?::jsonb)) <= ?
     on conflict (project_id, user_id) do update set properties = u.properties || excluded.properties
     where (select count(*) from jsonb_object_keys(u.properties || excluded.properties)) <= ?
     returning ${COLUMNS}`,
    [projectId, userId, json, json, maxKeys, maxKeys],
  );
  return row && endUserRow(row);
}
