import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { v7 } from 'uuid';

/**
 * Table definitions. The schema itself is owned by the hand-written migrations in ./migrations;
 * the column types, uniques and indexes repeated here keep MikroORM's schema diff against those
 * migrations empty, so a generated migration never tries to "fix" the database.
 */
const p = defineEntity.properties;

// Ids are UUID v7 made in the app: time-ordered (index friendly) and known before the insert.
const id = () => p.uuid().primary().onCreate(() => v7());
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
    icon: p.text().nullable(),
    createdAt: createdAt(),
    updatedAt: timestamp().onCreate(() => new Date()).onUpdate(() => new Date()),
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

export type User = InferEntity<typeof User>;
export type Session = InferEntity<typeof Session>;
export type ApiToken = InferEntity<typeof ApiToken>;
export type InviteCode = InferEntity<typeof InviteCode>;

export const entities = [User, Session, ApiToken, InviteCode];
