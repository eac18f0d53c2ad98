/**
 * What the icon suites share (icons-*.test.ts): the field icons are sent in, a user of its own per parse,
 * the icon store as the service builds it on the run's database, and what its refusals carry.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { DatabaseIconRows } from '../../server/src/domain/icons.js';
import { ApiError } from '../../server/src/errors.js';
import { IconStore } from '../../server/src/storage/icons.js';
import { count, database } from '../support/harness.js';

export const FIELD = '/body/icon';
/** A user of its own for each parse: a save then releases no icon another test stored. */
export const sender = () => randomUUID();
export const DATA_URL = 'data:image/png;base64,';
export const HTML = Buffer.from('<!doctype html><html><body><script>alert(document.cookie)</script></body></html>');

/** What an answer from the envelope carries for a thrown ApiError: status, headers and body. */
export function asAnswer(error: unknown) {
  expect(error).to.be.instanceOf(ApiError);
  const { status, headers, code, message } = error as ApiError;
  return { status, headers, body: { success: false, error: { code, message } } };
}

/** The icon store's rows on the run's database, as the service builds them. */
export function databaseRows(): DatabaseIconRows {
  return new DatabaseIconRows(() => database().orm.em.fork());
}

/** How many icons the database records. */
export function storedIcons(): Promise<number> {
  return count('select count(*)::int from icons');
}

/** The store before each test, its CDN base read through `cdnBase` (a test may change it), and how many icons were recorded then. */
export async function freshIconStore(cdnBase: () => string): Promise<{ base: string; store: IconStore; storedBefore: number }> {
  return { base: 'http://cdn.test/cdn', store: new IconStore(databaseRows(), cdnBase), storedBefore: await storedIcons() };
}
