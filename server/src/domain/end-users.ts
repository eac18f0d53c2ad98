/** End users of the publisher's product: what the publisher recorded about them (identify) and when their events came. */
import type { components } from '../../../spec/generated/openapi.js';
import type { Project } from '../db/entities.js';
import { findEndUser, mergeEndUserProperties, type EndUserRow } from '../db/repositories/end-users-rows.js';
import { InvalidRequest, NotFound } from '../errors.js';
import { checkTags } from './events.js';
import type { Scope } from './scope.js';

export type { EndUserRow };

/** An end user holds at most this many properties, in one request and in all. */
export const MAX_PROPERTIES = 50;

/** `PUT /v1/projects/{namespace}/users/{user_id}`'s body. */
export type EndUserInput = components['schemas']['IdentifyRequest'];

function endUserNotFound(): NotFound {
  return new NotFound('No end user with this id in this project.');
}

/** A project's end users: what the publisher recorded about them, read back. */
export class EndUsers {
  /**
   * Merges `properties` into what is recorded about the end user, creating them when new. 400
   * (nothing changed) for keys or values a tag could not have, more than 50 keys sent, or a merge
   * that would hold more than 50.
   */
  async record({ em }: Scope, project: Project, userId: string, { properties, ...unhandled }: EndUserInput): Promise<EndUserRow> {
    const _everyField: Record<string, never> = unhandled;
    checkTags(properties, '/body/properties', MAX_PROPERTIES, 'properties');
    const merged = await mergeEndUserProperties(em, project.id, userId, properties, MAX_PROPERTIES);
    if (!merged) throw InvalidRequest.field('/body/properties', `would give this end user more than ${MAX_PROPERTIES} properties`);
    return merged;
  }

  /** The end user, once identified or named by an event; 404 otherwise. */
  async get({ em }: Scope, project: Project, userId: string): Promise<EndUserRow> {
    const found = await findEndUser(em, project.id, userId);
    if (!found) throw endUserNotFound();
    return found;
  }
}
