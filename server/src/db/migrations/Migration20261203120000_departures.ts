import { Migration } from '@mikro-orm/migrations';

/**
 * What a member's departure ends (docs/security.md, "What a member's departure ends").
 *
 * `webhook_endpoints.created_by`: the member an endpoint answers to, the one who made it or last
 * chose where it sends (a new address, or turning it on again); null for an endpoint made before
 * this column, or whose member's account is gone. When that member leaves the project, is removed
 * or deletes its account, its endpoints there are turned off with `disabled_reason`
 * `creator_left`. The index serves the foreign key's `set null` when an account is deleted; the
 * column never changes with `pending`, so the updates that keep `pending` stay HOT.
 *
 * `idempotency_keys.project_id`: the project the keyed request named in its path, resolved when the
 * key is claimed (so a later rename changes nothing); null for a request outside any project. A
 * departure deletes the member's keys of that project, so no answer recorded there is replayed to
 * someone who is no longer a member. No foreign key: a project's delete would have to find and
 * update a busy table's rows through an index every keyed request pays for, and a key naming a
 * deleted project is harmless (it expires within a day, and its answer is what its user got).
 */
export class Migration20261203120000_departures extends Migration {
  override up(): void {
    this.addSql(`
      alter table webhook_endpoints add column created_by uuid null,
        add constraint webhook_endpoints_created_by_foreign foreign key (created_by) references users (id) on delete set null`);
    this.addSql('create index webhook_endpoints_created_by_index on webhook_endpoints (created_by) where created_by is not null');
    this.addSql('alter table webhook_endpoints drop constraint webhook_endpoints_disabled_reason_check');
    this.addSql(`
      alter table webhook_endpoints add constraint webhook_endpoints_disabled_reason_check
        check (disabled_reason in ('gone', 'failing', 'backlog', 'creator_left'))`);
    this.addSql('alter table idempotency_keys add column project_id uuid null');
  }

  override down(): void {
    this.addSql('alter table idempotency_keys drop column project_id');
    this.addSql("update webhook_endpoints set disabled_reason = null where disabled_reason = 'creator_left'");
    this.addSql('alter table webhook_endpoints drop constraint webhook_endpoints_disabled_reason_check');
    this.addSql(
      "alter table webhook_endpoints add constraint webhook_endpoints_disabled_reason_check check (disabled_reason in ('gone', 'failing', 'backlog'))",
    );
    this.addSql('drop index webhook_endpoints_created_by_index');
    this.addSql('alter table webhook_endpoints drop column created_by');
  }
}
