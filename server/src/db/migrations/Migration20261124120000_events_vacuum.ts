import { Migration } from '@mikro-orm/migrations';

/**
 * Events are deleted by retention every few minutes, so the table's dead rows grow by a day's
 * publications each day. At PostgreSQL's default scale factor (20 % of the table) autovacuum would
 * wait weeks, while every retention batch walks the dead index entries first; at 1 % it comes
 * about once a day of expiry. (Only a setting of the table: autovacuum must be on.)
 */
export class Migration20261124120000_events_vacuum extends Migration {
  override up(): void {
    this.addSql('alter table events set (autovacuum_vacuum_scale_factor = 0.01)');
  }

  override down(): void {
    this.addSql('alter table events reset (autovacuum_vacuum_scale_factor)');
  }
}
