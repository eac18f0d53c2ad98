import { Migration } from '@mikro-orm/migrations';

/**
 * An address being undone is kept for its undo (domain/email-change.ts): while an undo link of
 * `email_reverts` lives (not used, not expired), no other account may take its `old_email`, by
 * sign-up or by an e-mail change, so that following the link always restores the address.
 *
 * Enforced by a trigger on `users` rather than by the code that writes the table, because a check
 * made before the write cannot see the reservation of a confirmation that has not committed yet:
 * a sign-up would check, find the address free in that uncommitted change, wait on the unique index
 * for it, and then insert the address the undo needs. The trigger runs in every statement that
 * gives a user an address (an insert, or an update of `email` to another address) and, under a
 * transaction-scoped advisory lock on each address it gives or gives up, looks for a live undo
 * link of another account that restores the address given. The lock is what makes the check hold:
 * the confirmation that gives an address up holds its lock until it commits, with its undo link,
 * so a sign-up of that address reads the link only once it is there; and a writer that took the
 * lock first sees the address still held and fails on the unique index. Locks are taken in key
 * order, so two changes swapping addresses queue rather than deadlock.
 *
 * A reserved address is refused as a taken one, with the unique constraint's own SQLSTATE (23505)
 * and name (`users_email_lower_unique`): every route that maps that constraint to 409 `email_taken`
 * answers for a reserved address exactly as for a taken one, and tells no one that an undo is
 * pending. The account the link restores may take its old address back itself (the undo would write
 * the same). Addresses compare by `lower()`, as the unique index does.
 *
 * The lock's key is the address's `hashtext`, in the advisory lock class 0x5b20 (pruning's is
 * 0x5b1f, db/prune-lock.ts; the migrations' lock is a single 64-bit key, a space of its own): two
 * addresses that hash alike only queue behind each other.
 */
export class Migration20261203000000_email_reservations extends Migration {
  override up(): void {
    this.addSql(`create index email_reverts_old_email_index on email_reverts (lower(old_email)) where used_at is null`);
    this.addSql(`
      create function users_email_reserved() returns trigger language plpgsql as $$
      declare
        given int := hashtext(lower(new.email));
        given_up int := case when tg_op = 'UPDATE' then hashtext(lower(old.email)) else given end;
      begin
        perform pg_advisory_xact_lock(x'5b20'::int, least(given, given_up));
        perform pg_advisory_xact_lock(x'5b20'::int, greatest(given, given_up));
        if exists (
          select 1 from email_reverts r
          where lower(r.old_email) = lower(new.email) and r.used_at is null and r.expires_at > now() and r.user_id <> new.id
        ) then
          raise exception 'the address is kept for the undo of an e-mail change'
            using errcode = 'unique_violation', constraint = 'users_email_lower_unique', table = 'users';
        end if;
        return new;
      end
      $$`);
    this.addSql(`create trigger users_email_reserved_insert before insert on users for each row execute function users_email_reserved()`);
    this.addSql(`
      create trigger users_email_reserved_update before update of email on users for each row
      when (lower(old.email) is distinct from lower(new.email)) execute function users_email_reserved()`);
  }

  override down(): void {
    this.addSql('drop trigger users_email_reserved_update on users');
    this.addSql('drop trigger users_email_reserved_insert on users');
    this.addSql('drop function users_email_reserved()');
    this.addSql('drop index email_reverts_old_email_index');
  }
}
