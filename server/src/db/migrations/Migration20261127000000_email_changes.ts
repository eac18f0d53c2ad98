import { Migration } from '@mikro-orm/migrations';

/**
 * An e-mail change's two one-time tokens (domain/email-change.ts), kept as SHA-256 only.
 *
 * `email_changes`: the change a user asked for and has not confirmed, at most one per user (a new
 * request replaces it in place), good until `expires_at`. Confirming deletes the row.
 *
 * `email_reverts`: the undo links mailed to the address a confirmed change replaced, good for 7
 * days and once (`used_at`); spent and expired ones are deleted at the user's next change.
 */
export class Migration20261127000000_email_changes extends Migration {
  override up(): void {
    this.addSql(`
      create table email_changes (
        user_id uuid not null,
        new_email text not null,
        token_hash char(64) not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        constraint email_changes_pkey primary key (user_id),
        constraint email_changes_user_id_foreign foreign key (user_id) references users (id) on delete cascade,
        constraint email_changes_token_hash_unique unique (token_hash),
        constraint email_changes_token_hash_check check (token_hash ~ '^[0-9a-f]{64}$')
      )`);
    this.addSql(`
      create table email_reverts (
        token_hash char(64) not null,
        user_id uuid not null,
        old_email text not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        used_at timestamptz null,
        constraint email_reverts_pkey primary key (token_hash),
        constraint email_reverts_user_id_foreign foreign key (user_id) references users (id) on delete cascade,
        constraint email_reverts_token_hash_check check (token_hash ~ '^[0-9a-f]{64}$')
      )`);
    this.addSql('create index email_reverts_user_id_index on email_reverts (user_id)');
  }

  override down(): void {
    this.addSql('drop table email_reverts');
    this.addSql('drop table email_changes');
  }
}
