import { Migration } from '@mikro-orm/migrations';

/**
 * A user's icon becomes what a project's is: the key (SHA-256 in hex) of an icon in the icon store,
 * or null. Nothing wrote the column before, so any value that is not a key is dropped rather than
 * kept as a dangling reference.
 */
export class Migration20261126100000_user_icons extends Migration {
  override up(): void {
    this.addSql(`update users set icon = null where icon is not null and icon !~ '^[0-9a-f]{64}$'`);
    this.addSql(`alter table users alter column icon type char(64)`);
  }

  override down(): void {
    this.addSql(`alter table users alter column icon type text`);
  }
}
