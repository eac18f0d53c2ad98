import { Migration } from '@mikro-orm/migrations';

/**
 * `event_counts` per hour (`span` 3600) and per UTC day (`span` 86400) too, so that a chart of hours
 * or days reads one row per feed and bucket instead of 4 or 96 quarter hours: on a project of 10
 * million events, 30 day buckets of 5 feeds read 14,400 quarter hours (30–90 ms of the statement
 * alone) against 155 days (bench/event-queries-results.md). The statement that inserts the events
 * writes them like the others (db/repositories/events-rows.ts); day buckets sum days where every
 * midnight is UTC's, hours where every one is on a whole hour, and quarter hours elsewhere
 * (db/repositories/event-counts-rows.ts).
 *
 * Filled here from the quarter hours, not from the events: retention has deleted events whose
 * counts stay. Adding the check takes the table's exclusive lock for the transaction, so no insert
 * of events commits between the fill and the end of the migration; an instance of an earlier
 * release still running after it (a rolling deploy) writes minutes and quarter hours only, and the
 * events it stores are missing from hours and days.
 */
export class Migration20261201000000_event_counts_hours_days extends Migration {
  override up(): void {
    this.addSql('alter table event_counts drop constraint event_counts_span_check');
    this.addSql('alter table event_counts add constraint event_counts_span_check check (span in (60, 900, 3600, 86400))');
    this.addSql(`
      insert into event_counts (project_id, span, start, feed_id, count)
      select c.project_id, s.span, to_timestamp(floor(extract(epoch from c.start) / s.span) * s.span), c.feed_id, sum(c.count)
      from event_counts c cross join (values (3600), (86400)) as s(span)
      where c.span = 900
      group by 1, 2, 3, 4`);
  }

  override down(): void {
    this.addSql('delete from event_counts where span in (3600, 86400)');
    this.addSql('alter table event_counts drop constraint event_counts_span_check');
    this.addSql('alter table event_counts add constraint event_counts_span_check check (span in (60, 900))');
  }
}
