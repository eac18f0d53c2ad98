import { Migration } from '@mikro-orm/migrations';

/** Projects and what hangs off them. Deleting a project cascades to all of it in one statement. */
export class Migration20261123120000_projects extends Migration {
  override up(): void {
    this.addSql(`
      create table projects (
        id uuid primary key,
        namespace text not null,
        name text not null,
        icon char(64) null,
        tier integer not null default 0,
        billing_id text null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        constraint projects_namespace_unique unique (namespace),
        constraint projects_billing_id_unique unique (billing_id),
        constraint projects_tier_check check (tier >= 0)
      )`);

    this.addSql(`
      create table project_members (
        id uuid primary key,
        project_id uuid not null,
        user_id uuid not null,
        role text not null,
        created_at timestamptz not null,
        constraint project_members_project_user_unique unique (project_id, user_id),
        constraint project_members_role_check check (role in ('owner', 'member')),
        constraint project_members_project_id_foreign foreign key (project_id) references projects (id) on delete cascade,
        constraint project_members_user_id_foreign foreign key (user_id) references users (id) on delete cascade
      )`);
    // Exactly one owner per project, enforced where no race can get past it.
    this.addSql(`create unique index project_members_one_owner on project_members (project_id) where role = 'owner'`);
    this.addSql(`create index project_members_user_id_index on project_members (user_id)`);

    this.addSql(`
      create table feeds (
        id uuid primary key,
        project_id uuid not null,
        name text not null,
        description text null,
        emoji text null,
        type integer not null default 0,
        created_at timestamptz not null,
        constraint feeds_project_name_unique unique (project_id, name),
        constraint feeds_project_id_foreign foreign key (project_id) references projects (id) on delete cascade
      )`);

    this.addSql(`
      create table project_invites (
        id uuid primary key,
        project_id uuid not null,
        user_id uuid not null,
        invited_by_id uuid null,
        created_at timestamptz not null,
        constraint project_invites_project_user_unique unique (project_id, user_id),
        constraint project_invites_project_id_foreign foreign key (project_id) references projects (id) on delete cascade,
        constraint project_invites_user_id_foreign foreign key (user_id) references users (id) on delete cascade,
        constraint project_invites_invited_by_id_foreign foreign key (invited_by_id) references users (id) on delete set null
      )`);
    this.addSql(`create index project_invites_user_id_index on project_invites (user_id)`);

    this.addSql(`
      create table insights (
        id uuid primary key,
        project_id uuid not null,
        title text not null,
        value jsonb not null,
        emoji text null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        constraint insights_project_id_foreign foreign key (project_id) references projects (id) on delete cascade
      )`);
    // Pages walk (project_id, id desc): the cursor is the last id seen.
    this.addSql(`create index insights_project_id_id_index on insights (project_id, id)`);

    this.addSql(`
      create table activity (
        id uuid primary key,
        project_id uuid not null,
        type text not null,
        actor_id uuid null,
        data jsonb not null,
        created_at timestamptz not null,
        constraint activity_project_id_foreign foreign key (project_id) references projects (id) on delete cascade,
        constraint activity_actor_id_foreign foreign key (actor_id) references users (id) on delete set null
      )`);
    this.addSql(`create index activity_project_id_id_index on activity (project_id, id)`);
  }

  override down(): void {
    this.addSql('drop table activity');
    this.addSql('drop table insights');
    this.addSql('drop table project_invites');
    this.addSql('drop table feeds');
    this.addSql('drop table project_members');
    this.addSql('drop table projects');
  }
}
