import { Migration } from '@mikro-orm/migrations';

/**
 * Billing: the Stripe events already handled. The webhook records an event's id in the transaction
 * of the change it makes, so a redelivered or replayed event finds its id here and changes nothing.
 */
export class Migration20261123130000_billing extends Migration {
  override up(): void {
    this.addSql(`
      create table stripe_events (
        id text primary key,
        type text not null,
        received_at timestamptz not null
      )`);
  }

  override down(): void {
    this.addSql('drop table stripe_events');
  }
}
