/** The account's API tokens, for scripts (on /account): a new one is shown once, with a copy button. */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useAction } from '../mutation.ts';
import { useState } from 'preact/hooks';
import { sb, type Schemas } from '../api.ts';
import { ago, formatTime } from '../format.ts';
import { projectsQuery } from '../queries/projects-queries.ts';
import { invalidateTokens, tokensQuery } from '../queries/tokens-queries.ts';
import { Empty, ErrorNote, Field, Form, isolatedText, Loading, UserText } from '../ui.tsx';

type Scope = Schemas['ApiTokenScope'];
type Created = Schemas['CreatedApiToken'];

const SCOPES: { value: Scope; label: string }[] = [
  { value: 'all', label: 'Everything (all)' },
  { value: 'events:write', label: 'Publish events only (events:write)' },
  { value: 'read', label: 'Read only (read)' },
  { value: 'insights:write', label: 'Write insights only (insights:write)' },
];

export function TokensSection() {
  const client = useQueryClient();
  const tokens = useQuery(tokensQuery);
  const projects = useQuery(projectsQuery);
  const [name, setName] = useState('');
  const [project, setProject] = useState('');
  const [scope, setScope] = useState<Scope>('all');
  const [created, setCreated] = useState<Created | null>(null);
  const create = useAction({
    mutationFn: () => sb.tokens.create({ name, scopes: [scope], ...(project ? { projects: [project] } : {}) }),
    onSuccess: (token) => {
      setCreated(token);
      setName('');
      void invalidateTokens(client);
    },
  });
  const revoke = useAction({
    mutationFn: (id: string) => sb.tokens.delete(id),
    onSuccess: () => invalidateTokens(client),
  });
  const items = tokens.data?.items ?? [];
  return (
    <section class="panel" id="api-tokens" aria-labelledby="api-tokens-title" tabIndex={-1}>
      <h2 id="api-tokens-title">API tokens</h2>
      <p class="muted">
        For your code: publish events with <code>{'new Signalboard({ baseUrl, token })'}</code>. A token acts as you, within what it is
        limited to.
      </p>
      <section aria-labelledby="new-token">
        <h3 id="new-token">New token</h3>
        <Form onSubmit={() => create.mutate()} label="New API token">
          <Field
            label="Token name"
            value={name}
            onValue={setName}
            required
            maxLength={100}
            hint="To recognise it by, e.g. “deploy script”."
          />
          <div class="field">
            <label for="token-project">Project</label>
            <select id="token-project" value={project} onChange={(e) => setProject(e.currentTarget.value)}>
              <option value="">All my projects</option>
              {(projects.data?.items ?? []).map((p) => (
                <option key={p.id} value={p.namespace}>
                  {isolatedText(p.name)} ({p.namespace})
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="token-scope">May do</label>
            <select id="token-scope" value={scope} onChange={(e) => setScope(e.currentTarget.value as Scope)}>
              {SCOPES.map((s) => (
                <option key={s.value} value={s.value}>
                  {s.label}
                </option>
              ))}
            </select>
          </div>
          <ErrorNote error={create.error} />
          <button type="submit" disabled={create.isPending}>
            Create token
          </button>
        </Form>
        {created && <NewToken token={created} />}
      </section>
      <h3>Your tokens</h3>
      <ErrorNote error={tokens.error ?? revoke.error} />
      {tokens.isLoading ? (
        <Loading what="Loading tokens" />
      ) : items.length === 0 ? (
        <Empty>No API tokens.</Empty>
      ) : (
        <ul class="rows" aria-label="API tokens">
          {items.map((token) => (
            <li key={token.id} class="row">
              <span class="grow">
                <strong>
                  <UserText text={token.name} />
                </strong>
                <span class="muted">
                  {' '}
                  · {token.scopes.join(', ')} · {token.projects ? token.projects.join(', ') : 'all projects'} · made{' '}
                  {formatTime(token.created_at)} · {token.last_used_at ? `last used ${ago(token.last_used_at)}` : 'never used'}
                  {token.expires_at ? ` · expires ${formatTime(token.expires_at)}` : ''}
                </span>
              </span>
              <button
                type="button"
                class="danger"
                disabled={revoke.isPending}
                onClick={() => {
                  if (confirm(`Revoke the token ${token.name}? Code using it stops working at once.`)) revoke.mutate(token.id);
                }}
              >
                Revoke
              </button>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function NewToken({ token }: { token: Created }) {
  const [copied, setCopied] = useState<string | null>(null);
  return (
    <div class="new-token" role="status">
      <p>
        <strong>
          <UserText text={token.name} />
        </strong>
        : copy it now, it is not shown again.
      </p>
      <div class="token-row">
        <code class="token" aria-label="The new token">
          {token.token}
        </code>
        <button
          type="button"
          onClick={() =>
            void navigator.clipboard.writeText(token.token).then(
              () => setCopied('Copied.'),
              () => setCopied('Copying failed: select the token and copy it.'),
            )
          }
        >
          Copy
        </button>
      </div>
      {copied && <span class="muted">{copied}</span>}
    </div>
  );
}
