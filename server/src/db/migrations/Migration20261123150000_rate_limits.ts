import { Migration } from '@mikro-orm/migrations';

/**
 * Rate-limit counters shared by every instance on one database, in the layout rate-limiter-flexible's
 * PostgreSQL store reads (it is told the table exists, so it never creates tables of its own).
 */
export class Migration20261123150000_rate_limits extends Migration {
  override up(): void {
    this.addSql(`
      create table rate_limits (
        key varchar(255) primary key,
        points integer not null default 0,
        expire bigint
      )`);
  }

  override down(): void {
    this.addSql('drop table rate_limits');
  }
}
