import { Migration } from '@mikro-orm/migrations';

/**
 * `Idempotency-Key`s (http/idempotency.ts), one row per key a user sent: the request it was first
 * used for (`fingerprint`, the SHA-256 of its method, path and body) and either the claim of the
 * request still handling it (`claim`, good until `lease_until`) or the answer it gave (`status`,
 * `body`: the JSON sent, null for a 204). Every time is the database's clock. Deleted with its user;
 * pruned a day after `created_at` (maintenance/prune.ts), oldest first by `created_at`.
 */
export class Migration20261125000000_idempotency_keys extends Migration {
  override up(): void {
    this.addSql(`
      create table idempotency_keys (
        user_id uuid not null,
        key varchar(255) not null,
        fingerprint char(64) not null,
        created_at timestamptz not null,
        claim uuid null,
        lease_until timestamptz null,
        status smallint null,
        body text null,
        constraint idempotency_keys_pkey primary key (user_id, key),
        constraint idempotency_keys_user_id_foreign foreign key (user_id) references users (id) on delete cascade,
        constraint idempotency_keys_key_check check (key ~ '^[!-~]{1,255}$'),
        constraint idempotency_keys_fingerprint_check check (fingerprint ~ '^[0-9a-f]{64}$'),
        constraint idempotency_keys_state_check check (
          (claim is not null and lease_until is not null and status is null and body is null)
          or (claim is null and lease_until is null and status between 200 and 499)
        )
      )`);
    // The prune walks the oldest first.
    this.addSql('create index idempotency_keys_created_at_index on idempotency_keys (created_at)');
  }

  override down(): void {
    this.addSql('drop table idempotency_keys');
  }
}
