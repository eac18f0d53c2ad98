/**
 * The contents (members and feeds) of a page of projects, in one statement whatever the number of
 * projects, members and feeds.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { query } from '../raw.js';
import { PROJECT_CONTENTS, type ProjectContents } from './project-contents.js';

/** A project's id with its contents. */
export interface ProjectContentsById extends ProjectContents {
  id: string;
}

const CONTENTS_WITHIN = `select id, members, feeds from (
    select c.id, c.ord, c.members, c.feeds, sum(octet_length(c.members::text) + octet_length(c.feeds::text)) over (order by c.ord) as bytes
    from (select p.id, p.ord, ${PROJECT_CONTENTS} from unnest(?::uuid[]) with ordinality as p(id, ord)) c
  ) sized
  where ord = 1 or bytes <= ?`;

/**
 * The contents of the projects `ids`, taken in order while they fill at most `budgetBytes` (measured
 * as PostgreSQL writes them): the first project always comes, and those after the one that would
 * pass the budget are left out. Rows come in no particular order.
 */
export function contentsWithin(em: EntityManager, ids: string[], budgetBytes: number): Promise<ProjectContentsById[]> {
  return query<ProjectContentsById>(em, CONTENTS_WITHIN, [ids, budgetBytes]);
}
