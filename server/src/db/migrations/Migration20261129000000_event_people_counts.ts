import { Migration } from '@mikro-orm/migrations';

/**
 * Who an event concerns, whether to tell someone, and counts that outlive the events.
 *
 * `events.user_id` / `events.notify`: the end user of the publisher's product an event concerns
 * (the journey of `GET …/events?user_id=`, on its own index ending in the id the cursor walks), and
 * the publisher's request that people be told. Adding a nullable column and one with a constant
 * default rewrites nothing, whatever the table's size.
 *
 * `events_search_index`: the words of `event` and `description` for `q=`, as PostgreSQL full-text
 * search with the `simple` configuration (lower-cased whole words, no stemming, no stop words:
 * docs/decisions.md says why not trigrams). An expression index, so the table is not rewritten and
 * the query must spell the same expression (db/repositories/events-rows.ts).
 *
 * `event_counts`: how many events each feed stored per minute (`span` 60) and per quarter hour
 * (`span` 900) of the events' `timestamp`, written by the statement that inserts the events. Hour
 * and day buckets in any time zone are sums of quarter hours (every zone's offset is a multiple of
 * 15 minutes). Retention deletes events, never these rows; a deleted feed takes its counts along.
 *
 * `end_users`: what a project knows about one of its end users (`PUT …/users/{user_id}`), and the
 * first, last and number of their events, kept up by the same statement.
 */
export class Migration20261129000000_event_people_counts extends Migration {
  override up(): void {
    this.addSql('alter table events add column user_id text null, add column notify boolean not null default false');
    this.addSql('create index events_project_id_user_id_id_index on events (project_id, user_id, id) where user_id is not null');
    this.addSql(
      "create index events_search_index on events using gin (to_tsvector('simple'::regconfig, event || ' ' || coalesce(description, '')))",
    );
    this.addSql(`
      create table event_counts (
        project_id uuid not null,
        span int not null,
        start timestamptz not null,
        feed_id uuid not null,
        count bigint not null,
        constraint event_counts_pkey primary key (project_id, span, start, feed_id),
        constraint event_counts_project_id_foreign foreign key (project_id) references projects (id) on delete cascade,
        constraint event_counts_feed_id_foreign foreign key (feed_id) references feeds (id) on delete cascade,
        constraint event_counts_span_check check (span in (60, 900))
      )`);
    this.addSql('create index event_counts_feed_id_index on event_counts (feed_id)');
    this.addSql(`
      create table end_users (
        project_id uuid not null,
        user_id text not null,
        properties jsonb not null default '{}',
        first_seen timestamptz null,
        last_seen timestamptz null,
        event_count bigint not null default 0,
        constraint end_users_pkey primary key (project_id, user_id),
        constraint end_users_project_id_foreign foreign key (project_id) references projects (id) on delete cascade
      )`);
    // Counts of the events stored before this migration, so that charts start true.
    this.addSql(`
      insert into event_counts (project_id, span, start, feed_id, count)
      select e.project_id, s.span, to_timestamp(floor(extract(epoch from e.timestamp) / s.span) * s.span), e.feed_id, count(*)
      from events e cross join (values (60), (900)) as s(span)
      group by 1, 2, 3, 4`);
  }

  override down(): void {
    this.addSql('drop table end_users');
    this.addSql('drop table event_counts');
    this.addSql('drop index events_search_index');
    this.addSql('drop index events_project_id_user_id_id_index');
    this.addSql('alter table events drop column notify, drop column user_id');
  }
}
