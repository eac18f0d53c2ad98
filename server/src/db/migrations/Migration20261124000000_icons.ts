import { Migration } from '@mikro-orm/migrations';

/**
 * Icons, by the SHA-256 of their PNG. `bytes` holds the PNG when the database is the icon store;
 * with ICON_STORE=s3 the bucket holds it and the row (`bytes` null) records that the icon is kept,
 * so that pruning can decide on it under the row's lock. `stored_at` is the last time a change
 * stored or referred to the icon: the prune's grace period counts from it.
 */
export class Migration20261124000000_icons extends Migration {
  override up(): void {
    this.addSql(`
      create table icons (
        sha256 char(64) primary key,
        size integer not null,
        bytes bytea null,
        stored_at timestamptz not null,
        constraint icons_sha256_check check (sha256 ~ '^[0-9a-f]{64}$'),
        constraint icons_size_check check (size > 0 and (bytes is null or octet_length(bytes) = size))
      )`);
    // The prune walks the oldest first.
    this.addSql(`create index icons_stored_at_index on icons (stored_at)`);
  }

  override down(): void {
    this.addSql('drop table icons');
  }
}
