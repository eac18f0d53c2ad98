import { Migration } from '@mikro-orm/migrations';

/**
 * Password reset tokens (domain/password-reset.ts): at most one per user, since a new request
 * replaces the user's earlier token in place. Only the token's SHA-256 is kept. A token is good
 * while `used_at` is null and `expires_at` (an hour after `created_at`, both the database's clock)
 * is in the future; taking it sets `used_at`, and the row stays, spent, until the user's next
 * request replaces it or the user is deleted.
 */
export class Migration20261126110000_password_reset_tokens extends Migration {
  override up(): void {
    this.addSql(`
      create table password_reset_tokens (
        user_id uuid not null,
        token_hash char(64) not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        used_at timestamptz null,
        constraint password_reset_tokens_pkey primary key (user_id),
        constraint password_reset_tokens_user_id_foreign foreign key (user_id) references users (id) on delete cascade,
        constraint password_reset_tokens_token_hash_unique unique (token_hash),
        constraint password_reset_tokens_token_hash_check check (token_hash ~ '^[0-9a-f]{64}$')
      )`);
  }

  override down(): void {
    this.addSql('drop table password_reset_tokens');
  }
}
