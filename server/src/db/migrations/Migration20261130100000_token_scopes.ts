import { Migration } from '@mikro-orm/migrations';

/**
 * What an API token may do (`scopes`) and which projects it reaches (policies/project.ts).
 *
 * `api_tokens.scopes`: `{all}`, or a non-empty set of the narrower scopes; the check holds the
 * contract's rule that `all` stands alone. Tokens made before keep `{all}`.
 *
 * `api_tokens.limited_to_projects`: whether the token reaches only the projects of
 * `api_token_projects`, by id, so that a project's new namespace changes nothing. The flag is kept
 * apart from the rows because a limited token whose projects were all deleted reaches none, which
 * an empty set of rows alone would read as "every project". Both sides cascade: a revoked token
 * or a deleted project takes its rows with it (the index on `project_id` serves the latter).
 */
export class Migration20261130100000_token_scopes extends Migration {
  override up(): void {
    this.addSql(`alter table api_tokens add column scopes text[] not null default '{all}'`);
    this.addSql(`alter table api_tokens add column limited_to_projects boolean not null default false`);
    this.addSql(`
      alter table api_tokens add constraint api_tokens_scopes_check check (
        cardinality(scopes) > 0
        and scopes <@ array['all', 'events:write', 'insights:write', 'read']::text[]
        and (scopes = '{all}' or not 'all' = any(scopes))
      )`);
    this.addSql(`
      create table api_token_projects (
        token_id uuid not null,
        project_id uuid not null,
        constraint api_token_projects_pkey primary key (token_id, project_id),
        constraint api_token_projects_token_id_foreign foreign key (token_id) references api_tokens (id) on delete cascade,
        constraint api_token_projects_project_id_foreign foreign key (project_id) references projects (id) on delete cascade
      )`);
    this.addSql('create index api_token_projects_project_id_index on api_token_projects (project_id)');
  }

  override down(): void {
    this.addSql('drop table api_token_projects');
    this.addSql('alter table api_tokens drop constraint api_tokens_scopes_check');
    this.addSql('alter table api_tokens drop column limited_to_projects');
    this.addSql('alter table api_tokens drop column scopes');
  }
}
