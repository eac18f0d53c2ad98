import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook endpoints and their deliveries: an outbox in the service's own tables (docs/architecture.md,
 * Webhooks).
 *
 * `webhook_endpoints`: the filter's lists are empty for "everything"; `pending` counts the
 * endpoint's deliveries in state `pending`, kept by the statements that queue and settle them, so
 * the cap of 10,000 waiting is checked without counting rows. It changes with every group of
 * events and every settled chunk, so no index covers it (nor its predicate) and the table's pages
 * keep room (fillfactor 50): those updates stay HOT, on the row's own page, instead of leaving a
 * new index entry each. The signing secret must be read back to sign, so it is
 * stored as given (like the Stripe keys of the settings); `previous_secret` signs beside it until
 * `previous_secret_expires_at` after a rotation. `missed_from_event`: when the backlog's cap paused
 * it, the first event left out, from which enabling it queues again.
 *
 * `webhook_deliveries`: a queue: one change on its way to one endpoint. Every row is updated at
 * least twice (claimed, settled), so its autovacuum comes after 1 % of the rows changed rather than
 * 20 %, keeping the index of due rows, which claims walk, free of dead entries. `event.created` holds the event's id
 * and reads the event at each attempt (events are only ever added, never changed); the other types
 * hold `data` as it was when the change committed. While `pending`, `next_attempt_at` is when the
 * next attempt is due, and `leased_until`, while an instance sends it, when that instance's lease
 * runs out: a delivery taken by an instance that died is taken again then. The lease is a column
 * no index holds, so claiming a row is a HOT update on its own page (fillfactor 70) that adds no
 * index entry; a queue row is otherwise written three times (queued, claimed, settled). `attempts`
 * counts the attempts begun; `log` keeps the latest 20 attempts' outcomes, newest first. The
 * event's id has no foreign key on purpose: a feed's delete or retention removes events, and a
 * delivery then settles as failed rather than vanish under the `pending` count. Settled rows are
 * pruned by id (UUID v7, time-ordered), so no index covers them apart from the primary key.
 */
export class Migration20261202000000_webhooks extends Migration {
  override up(): void {
    this.addSql(`
      create table webhook_endpoints (
        id uuid not null,
        project_id uuid not null,
        url text not null,
        description text null,
        format text not null,
        types text[] not null default '{}',
        feeds text[] not null default '{}',
        tags text[] not null default '{}',
        notify_only boolean not null default false,
        enabled boolean not null default true,
        disabled_reason text null,
        disabled_at timestamptz null,
        missed_from_event uuid null,
        secret text not null,
        previous_secret text null,
        previous_secret_expires_at timestamptz null,
        pending integer not null default 0,
        failing_since timestamptz null,
        created_at timestamptz not null,
        constraint webhook_endpoints_pkey primary key (id),
        constraint webhook_endpoints_project_id_foreign foreign key (project_id) references projects (id) on delete cascade,
        constraint webhook_endpoints_format_check check (format in ('standard', 'slack', 'discord')),
        constraint webhook_endpoints_disabled_reason_check check (disabled_reason in ('gone', 'failing', 'backlog')),
        constraint webhook_endpoints_pending_check check (pending >= 0)
      )`);
    this.addSql('create index webhook_endpoints_project_id_index on webhook_endpoints (project_id, id)');
    this.addSql('alter table webhook_endpoints set (fillfactor = 50)');
    this.addSql(`
      create table webhook_deliveries (
        id uuid not null,
        endpoint_id uuid not null,
        type text not null,
        event_id uuid null,
        payload jsonb null,
        state text not null default 'pending',
        attempts integer not null default 0,
        next_attempt_at timestamptz null,
        leased_until timestamptz null,
        log jsonb not null default '[]',
        created_at timestamptz not null,
        constraint webhook_deliveries_pkey primary key (id),
        constraint webhook_deliveries_endpoint_id_foreign foreign key (endpoint_id) references webhook_endpoints (id) on delete cascade,
        constraint webhook_deliveries_state_check check (state in ('pending', 'delivered', 'failed')),
        constraint webhook_deliveries_data_check check ((event_id is null) <> (payload is null))
      )`);
    this.addSql('create index webhook_deliveries_endpoint_id_index on webhook_deliveries (endpoint_id, id)');
    this.addSql("create index webhook_deliveries_due_index on webhook_deliveries (endpoint_id, next_attempt_at) where state = 'pending'");
    this.addSql(
      'alter table webhook_deliveries set (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02)',
    );
  }

  override down(): void {
    this.addSql('drop table webhook_deliveries');
    this.addSql('drop table webhook_endpoints');
  }
}
