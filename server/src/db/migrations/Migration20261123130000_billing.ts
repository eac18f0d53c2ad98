import { Migration } from '@mikro-orm/migrations';

/**
 * Billing. `stripe_events`: the Stripe events already handled; the webhook records an event's id in
 * the transaction of the change it makes, so a redelivered or replayed event changes nothing.
 * `stripe_subscriptions`: each subscription's last known status and tier, and the time of the event
 * that said so, because Stripe's events arrive in any order.
 */
export class Migration20261123130000_billing extends Migration {
  override up(): void {
    this.addSql(`
      create table stripe_events (
        id text primary key,
        type text not null,
        received_at timestamptz not null
      )`);

    this.addSql(`
      create table stripe_subscriptions (
        id text primary key,
        status text not null,
        tier integer not null,
        event_created timestamptz not null
      )`);
  }

  override down(): void {
    this.addSql('drop table stripe_subscriptions');
    this.addSql('drop table stripe_events');
  }
}
