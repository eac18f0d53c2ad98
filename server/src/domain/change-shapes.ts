/**
 * How a change is shown in its webhook deliveries' `data`: as the API shows it, by the presenters,
 * which services.ts hands in (domain/ presents nothing itself). The modules that make a change
 * (insights, projects, members) queue its deliveries with these shapes, in the change's
 * transaction; the webhooks module (server/src/webhooks/) shows events with them when it sends.
 * Shown when the change commits, so a delivery says what the change made even if a later one
 * changed it again. A module of its own, below both, so that neither imports the other for it.
 */
import type { User } from '../db/entities.js';
import type { EventRow } from '../db/repositories/events-rows.js';
import type { InsightView } from '../db/repositories/insights-rows.js';
import type { ProjectView } from './project-view.js';

export interface ChangeShapes {
  member(user: Pick<User, 'id' | 'username' | 'icon'>, role: 'owner' | 'member'): unknown;
  project(view: ProjectView): unknown;
  insight(insight: InsightView): unknown;
  event(event: EventRow): unknown;
}
