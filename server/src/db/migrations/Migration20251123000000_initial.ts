import { Migration } from '@mikro-orm/migrations';

/** Accounts, their credentials, and the invite codes that admit new accounts. */
export class Migration20251123000000_initial extends Migration {
  override up(): void {
    this.addSql(`
      create table users (
        id uuid primary key,
        username text not null,
        email text not null,
        password_hash text not null,
        icon text null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        constraint users_username_unique unique (username),
        constraint users_username_check check (username = lower(username))
      )`);
    // Email addresses keep the case they were given in, but two may not differ only by case.
    this.addSql(`create unique index users_email_lower_unique on users (lower(email))`);

    this.addSql(`
      create table sessions (
        id uuid primary key,
        user_id uuid not null,
        token_hash char(64) not null,
        user_agent text null,
        ip text null,
        created_at timestamptz not null,
        last_used_at timestamptz not null,
        expires_at timestamptz not null,
        constraint sessions_token_hash_unique unique (token_hash),
        constraint sessions_user_id_foreign foreign key (user_id) references users (id) on delete cascade
      )`);
    this.addSql(`create index sessions_user_id_index on sessions (user_id)`);

    this.addSql(`
      create table api_tokens (
        id uuid primary key,
        user_id uuid not null,
        name text not null,
        token_hash char(64) not null,
        created_at timestamptz not null,
        last_used_at timestamptz null,
        expires_at timestamptz null,
        constraint api_tokens_token_hash_unique unique (token_hash),
        constraint api_tokens_user_id_foreign foreign key (user_id) references users (id) on delete cascade
      )`);
    this.addSql(`create index api_tokens_user_id_index on api_tokens (user_id)`);

    this.addSql(`
      create table invite_codes (
        id uuid primary key,
        code_hash char(64) not null,
        hint text not null,
        uses_total integer not null,
        uses_left integer not null,
        expires_at timestamptz null,
        created_at timestamptz not null,
        constraint invite_codes_code_hash_unique unique (code_hash),
        -- The last use of a code can be taken only once, however many sign-ups race for it.
        constraint invite_codes_uses_left_check check (uses_left >= 0)
      )`);
  }

  override down(): void {
    this.addSql('drop table invite_codes');
    this.addSql('drop table api_tokens');
    this.addSql('drop table sessions');
    this.addSql('drop table users');
  }
}
