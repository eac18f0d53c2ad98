import { Migration } from '@mikro-orm/migrations';

/**
 * `icons.recorded_by`: the user whose change stored or used the icon last (null for icons stored
 * before, or moved from disk). That user's next icon change deletes it once nothing refers to it
 * (db/repositories/icons-rows.ts `releaseIcons`), so that replacing icons in a loop does not pile them up
 * until the prune. No foreign key: a deleted user's id is never reused, so it names nobody, and a
 * user's deletion need not touch the icons it stored.
 *
 * The indexes serve that release, run in every icon change: its user's icons, and whether a
 * project or a user still refers to one (the prune asks the same).
 */
export class Migration20261128120000_icons_recorded_by extends Migration {
  override up(): void {
    this.addSql('alter table icons add column recorded_by uuid null');
    this.addSql('create index icons_recorded_by_index on icons (recorded_by) where recorded_by is not null');
    this.addSql('create index projects_icon_index on projects (icon) where icon is not null');
    this.addSql('create index users_icon_index on users (icon) where icon is not null');
  }

  override down(): void {
    this.addSql('drop index users_icon_index');
    this.addSql('drop index projects_icon_index');
    this.addSql('alter table icons drop column recorded_by');
  }
}
