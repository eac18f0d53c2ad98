import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { v7 } from 'uuid';
import type { components } from '../../../spec/generated/openapi.js';

/**
 * Table definitions. The schema itself is owned by the hand-written migrations in ./migrations;
 * the column types, uniques and indexes repeated here keep MikroORM's schema diff against those
 * migrations empty, so a generated migration never tries to "fix" the database.
 */
const p = defineEntity.properties;

// Ids are UUID v7 made in the app: time-ordered (index friendly) and known before the insert.
const id = () =>
  p
    .uuid()
    .primary()
    .onCreate(() => v7());
const timestamp = () => p.datetime().columnType('timestamptz');
const createdAt = () => timestamp().onCreate(() => new Date());
// SHA-256 in hex; the plain secret is never stored.
const hash = () => p.string().columnType('char(64)').unique();

export const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: id(),
    username: p.text().unique(),
    email: p.text(),
    passwordHash: p.text(),
    /** The icon's key in the icon store (its SHA-256), or null. */
    icon: p.string().columnType('char(64)').nullable(),
    createdAt: createdAt(),
    updatedAt: timestamp()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
  // Usernames are stored lower-case, so lookups compare the column directly; email addresses keep
  // their case but are unique without regard to it.
  checks: [{ name: 'users_username_check', expression: 'username = lower(username)' }],
  uniques: [{ name: 'users_email_lower_unique', expression: 'create unique index users_email_lower_unique on users (lower(email))' }],
});

export const Session = defineEntity({
  name: 'Session',
  tableName: 'sessions',
  properties: {
    id: id(),
    user: () => p.manyToOne(User).deleteRule('cascade').updateRule('no action').index(),
    tokenHash: hash(),
    userAgent: p.text().nullable(),
    ip: p.text().nullable(),
    createdAt: createdAt(),
    lastUsedAt: timestamp().onCreate(() => new Date()),
    expiresAt: timestamp(),
  },
});

/** What an API token may do, as the contract names it. */
export type ApiTokenScope = components['schemas']['ApiTokenScope'];

export const ApiToken = defineEntity({
  name: 'ApiToken',
  tableName: 'api_tokens',
  properties: {
    id: id(),
    user: () => p.manyToOne(User).deleteRule('cascade').updateRule('no action').index(),
    name: p.text(),
    tokenHash: hash(),
    createdAt: createdAt(),
    lastUsedAt: timestamp().nullable(),
    expiresAt: timestamp().nullable(),
    /** `['all']`, or a set of the narrower scopes (a check constraint holds it). */
    scopes: p.array<ApiTokenScope>().columnType('text[]'),
    /** Reaches only the projects of `api_token_projects` (repositories/accounts-rows.ts), however few are left. */
    limitedToProjects: p.boolean(),
  },
});

export const InviteCode = defineEntity({
  name: 'InviteCode',
  tableName: 'invite_codes',
  properties: {
    id: id(),
    codeHash: hash(),
    hint: p.text(),
    usesTotal: p.integer(),
    usesLeft: p.integer(),
    expiresAt: timestamp().nullable(),
    createdAt: createdAt(),
  },
  checks: [{ name: 'invite_codes_uses_left_check', expression: 'uses_left >= 0' }],
});

export const Project = defineEntity({
  name: 'Project',
  tableName: 'projects',
  properties: {
    id: id(),
    namespace: p.text().unique(),
    name: p.text(),
    /** The icon's key in the icon store (its SHA-256), or null. */
    icon: p.string().columnType('char(64)').nullable(),
    tier: p.integer().default(0),
    billingId: p.text().nullable().unique(),
    createdAt: createdAt(),
    updatedAt: timestamp()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
    members: () => p.oneToMany(ProjectMember).mappedBy('project'),
    feeds: () => p.oneToMany(Feed).mappedBy('project'),
  },
  checks: [{ name: 'projects_tier_check', expression: 'tier >= 0' }],
});

/** A user's place in a project. The owner is a member too, with role 'owner' (exactly one per project). */
export const ProjectMember = defineEntity({
  name: 'ProjectMember',
  tableName: 'project_members',
  properties: {
    id: id(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    user: () => p.manyToOne(User).deleteRule('cascade').updateRule('no action').index(),
    role: p.enum(['owner', 'member'] as const),
    createdAt: createdAt(),
  },
  uniques: [
    { name: 'project_members_project_user_unique', properties: ['project', 'user'] },
    {
      name: 'project_members_one_owner',
      expression: `create unique index project_members_one_owner on project_members (project_id) where role = 'owner'`,
    },
  ],
  checks: [{ name: 'project_members_role_check', expression: `role in ('owner', 'member')` }],
});

export const Feed = defineEntity({
  name: 'Feed',
  tableName: 'feeds',
  properties: {
    id: id(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    name: p.text(),
    description: p.text().nullable(),
    emoji: p.text().nullable(),
    type: p.integer().default(0),
    createdAt: createdAt(),
  },
  uniques: [{ name: 'feeds_project_name_unique', properties: ['project', 'name'] }],
});

/** A tag's value, as the contract defines it. */
export type TagValue = components['schemas']['TagValue'];

/** Something that happened in the user's own product, published to one of the project's feeds. */
export const Event = defineEntity({
  name: 'Event',
  tableName: 'events',
  properties: {
    id: id(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    feed: () => p.manyToOne(Feed).deleteRule('cascade').updateRule('no action'),
    event: p.text(),
    description: p.text().nullable(),
    emoji: p.text().nullable(),
    tags: p.json<Record<string, TagValue>>(),
    /** The end user of the publisher's product it concerns. */
    userId: p.text().nullable(),
    /** Whether the publisher asked that people be told. */
    notify: p.boolean().default(false),
    timestamp: timestamp(),
    createdAt: createdAt(),
  },
  indexes: [
    { name: 'events_project_id_id_index', properties: ['project', 'id'] },
    { name: 'events_feed_id_id_index', properties: ['feed', 'id'] },
    { name: 'events_tags_index', expression: 'create index events_tags_index on events using gin (tags jsonb_path_ops)' },
  ],
});

/** A pending invite of `user` to `project`; accepting turns it into a ProjectMember. */
export const ProjectInvite = defineEntity({
  name: 'ProjectInvite',
  tableName: 'project_invites',
  properties: {
    id: id(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    user: () => p.manyToOne(User).deleteRule('cascade').updateRule('no action').index(),
    invitedBy: () => p.manyToOne(User).nullable().deleteRule('set null').updateRule('no action'),
    createdAt: createdAt(),
  },
  uniques: [{ name: 'project_invites_project_user_unique', properties: ['project', 'user'] }],
});

/** An insight's value, as the contract defines it. */
export type InsightValue = components['schemas']['InsightValue'];

export const Insight = defineEntity({
  name: 'Insight',
  tableName: 'insights',
  properties: {
    id: id(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    title: p.text(),
    value: p.json<InsightValue>(),
    emoji: p.text().nullable(),
    createdAt: createdAt(),
    updatedAt: timestamp()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
  indexes: [{ name: 'insights_project_id_id_index', properties: ['project', 'id'] }],
});

/** The project's append-only log; `actor` is null for the system or a deleted account. */
export const Activity = defineEntity({
  name: 'Activity',
  tableName: 'activity',
  properties: {
    id: id(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    type: p.text(),
    actor: () => p.manyToOne(User).nullable().deleteRule('set null').updateRule('no action'),
    data: p.json<Record<string, unknown>>(),
    createdAt: createdAt(),
  },
  indexes: [{ name: 'activity_project_id_id_index', properties: ['project', 'id'] }],
});

/**
 * Stripe events already handled, by Stripe's event id (`evt_…`). Stripe delivers at least once; the
 * row is written in the transaction of the change the event made, so a redelivery changes nothing.
 */
export const StripeEvent = defineEntity({
  name: 'StripeEvent',
  tableName: 'stripe_events',
  properties: {
    id: p.text().primary(),
    type: p.text(),
    receivedAt: timestamp().onCreate(() => new Date()),
  },
});

/**
 * The last known state of each Stripe subscription, from its `customer.subscription.*` events.
 * Stripe does not deliver events in order: a subscription's first events often arrive before the
 * `checkout.session.completed` that ties it to a project, and an older update can arrive after a
 * newer one. `event_created` (the `created` time of the last event applied) lets an older event be
 * recognised and skipped; the stored tier is what a project gets when its checkout completes.
 */
export const StripeSubscription = defineEntity({
  name: 'StripeSubscription',
  tableName: 'stripe_subscriptions',
  properties: {
    id: p.text().primary(),
    status: p.text(),
    tier: p.integer(),
    eventCreated: timestamp(),
  },
});

export type User = InferEntity<typeof User>;
export type Session = InferEntity<typeof Session>;
export type ApiToken = InferEntity<typeof ApiToken>;
export type InviteCode = InferEntity<typeof InviteCode>;
export type Project = InferEntity<typeof Project>;
export type ProjectMember = InferEntity<typeof ProjectMember>;
export type Feed = InferEntity<typeof Feed>;
export type ProjectInvite = InferEntity<typeof ProjectInvite>;
export type Insight = InferEntity<typeof Insight>;
export type Activity = InferEntity<typeof Activity>;
export type Event = InferEntity<typeof Event>;
export type StripeEvent = InferEntity<typeof StripeEvent>;
export type StripeSubscription = InferEntity<typeof StripeSubscription>;

export const entities = [
  User,
  Session,
  ApiToken,
  InviteCode,
  Project,
  ProjectMember,
  Feed,
  ProjectInvite,
  Insight,
  Activity,
  Event,
  StripeEvent,
  StripeSubscription,
];
