import { Migration } from '@mikro-orm/migrations';

/** Events published to a project's feeds. */
export class Migration20261123140000_events extends Migration {
  override up(): void {
    this.addSql(`
      create table events (
        id uuid primary key,
        project_id uuid not null,
        feed_id uuid not null,
        event text not null,
        description text null,
        emoji text null,
        tags jsonb not null default '{}',
        timestamp timestamptz not null,
        created_at timestamptz not null,
        constraint events_project_id_foreign foreign key (project_id) references projects (id) on delete cascade,
        constraint events_feed_id_foreign foreign key (feed_id) references feeds (id) on delete cascade
      )`);
    // One index per way a page is read, each ending in the id the cursor walks (newest first):
    // the whole project, one feed, or one tag (`tags @> …`, answered by the GIN index).
    this.addSql(`create index events_project_id_id_index on events (project_id, id)`);
    this.addSql(`create index events_feed_id_id_index on events (feed_id, id)`);
    this.addSql(`create index events_tags_index on events using gin (tags jsonb_path_ops)`);
  }

  override down(): void {
    this.addSql('drop table events');
  }
}
