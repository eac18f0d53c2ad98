/**
 * Projects and what hangs off them, on the wire. Fields are picked one by one; a member shows
 * only id, username, icon and role: never an email or anything secret.
 */
import type { components } from '../../../spec/generated/openapi.js';
import type { Insight, ProjectInvite, ProjectMember, User } from '../db/entities.js';
import type { ActivityRow } from '../domain/activity.js';
import type { EndUserRow } from '../domain/end-users.js';
import type { EventCounts } from '../domain/event-counts.js';
import type { EventRow } from '../domain/events.js';
import type { FeedRow, ProjectView } from '../domain/project-view.js';
import type { IconStore } from '../storage/icons.js';

type Schemas = components['schemas'];

/** Turns icon keys into public addresses (`{CDN_URL}/icons/<sha256>.png`). */
export type IconUrls = Pick<IconStore, 'url'>;

export function presentMember(
  user: Pick<User, 'id' | 'username' | 'icon'>,
  icons: IconUrls,
  role?: ProjectMember['role'],
): Schemas['Member'] {
  return { id: user.id, username: user.username, icon: icons.url(user.icon), ...(role ? { role } : {}) };
}

export function presentFeed(feed: FeedRow): Schemas['Feed'] {
  return { id: feed.id, name: feed.name, description: feed.description ?? null, emoji: feed.emoji ?? null, type: feed.type };
}

export function presentProject({ project, members, feeds }: ProjectView, icons: IconUrls): Schemas['Project'] {
  return {
    id: project.id,
    namespace: project.namespace,
    name: project.name,
    icon: icons.url(project.icon),
    tier: project.tier,
    billing_id: project.billingId ?? null,
    feeds: feeds.map(presentFeed),
    members: members
      .sort((a, b) => Number(b.role === 'owner') - Number(a.role === 'owner'))
      .map((member) => presentMember(member, icons, member.role)),
    created_at: project.createdAt.toISOString(),
  };
}

export function presentInvite(invite: ProjectInvite, icons: IconUrls): Schemas['Invite'] {
  return {
    id: invite.id,
    user: presentMember(invite.user, icons),
    invited_by: invitedBy(invite, icons),
    created_at: invite.createdAt.toISOString(),
  };
}

export function presentReceivedInvite(invite: ProjectInvite, icons: IconUrls): Schemas['ReceivedInvite'] {
  const { project } = invite;
  return {
    project: { namespace: project.namespace, name: project.name, icon: icons.url(project.icon) },
    invited_by: invitedBy(invite, icons),
    created_at: invite.createdAt.toISOString(),
  };
}

function invitedBy(invite: ProjectInvite, icons: IconUrls): Schemas['Member'] | null {
  return invite.invitedBy ? presentMember(invite.invitedBy, icons) : null;
}

export function presentInsight(insight: Pick<Insight, 'id' | 'title' | 'value' | 'emoji' | 'createdAt' | 'updatedAt'>): Schemas['Insight'] {
  return {
    id: insight.id,
    title: insight.title,
    value: insight.value,
    emoji: insight.emoji ?? null,
    created_at: insight.createdAt.toISOString(),
    updated_at: insight.updatedAt.toISOString(),
  };
}

export function presentActivity(activity: ActivityRow, icons: IconUrls): Schemas['Activity'] {
  return {
    id: activity.id,
    type: activity.type,
    actor: activity.actor ? presentMember(activity.actor, icons) : null,
    data: activity.data,
    created_at: activity.createdAt.toISOString(),
  };
}

/** `event` must be loaded with its feed. */
export function presentEvent(event: EventRow): Schemas['Event'] {
  return {
    id: event.id,
    feed: event.feed,
    event: event.event,
    description: event.description ?? null,
    emoji: event.emoji ?? null,
    tags: event.tags,
    user_id: event.userId,
    notify: event.notify,
    timestamp: event.timestamp.toISOString(),
    created_at: event.createdAt.toISOString(),
  };
}

export function presentEventCounts(counts: EventCounts): Schemas['EventCounts'] {
  return {
    interval: counts.interval,
    tz: counts.tz,
    series: counts.series.map((series) => ({
      feed: series.feed,
      buckets: series.buckets.map((bucket) => ({ start: bucket.start.toISOString(), count: bucket.count })),
    })),
  };
}

export function presentEndUser(user: EndUserRow): Schemas['EndUser'] {
  return {
    user_id: user.userId,
    properties: user.properties,
    first_seen: user.firstSeen?.toISOString() ?? null,
    last_seen: user.lastSeen?.toISOString() ?? null,
    event_count: user.eventCount,
  };
}
