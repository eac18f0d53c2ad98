/** /projects/{namespace}/insights: the project's figures as tiles, refreshed every few seconds. */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useAction } from '../../mutation.ts';
import { useState } from 'preact/hooks';
import { sb } from '../../api.ts';
import { ago, formatTime, formatValue } from '../../format.ts';
import { insightsQuery, invalidateInsights } from '../../queries/insights-queries.ts';
import { Emoji, Empty, ErrorNote, Field, Form, Loading, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

export default function Insights({ project }: ProjectPageProps) {
  const insights = useQuery({ ...insightsQuery(project.namespace), refetchInterval: 5_000 });
  const items = insights.data?.items ?? [];
  return (
    <section>
      <PageTitle title={`${project.name}: insights`}>Insights</PageTitle>
      <p class="muted">
        Figures your code sets or increments (<code>insights.increment</code>); this page refreshes every 5 seconds.
      </p>
      <ErrorNote error={insights.error} />
      {insights.isLoading ? (
        <Loading what="Loading insights" />
      ) : items.length === 0 ? (
        <Empty>No insights yet. Create one below, or from your code.</Empty>
      ) : (
        <ul class="tiles" aria-label="Insights" aria-live="polite">
          {items.map((insight) => (
            <li key={insight.id} class="tile">
              <div class="tile-title">
                {insight.emoji && <Emoji text={insight.emoji} />}
                <UserText class="insight-title" text={insight.title} />
              </div>
              <div class="tile-value">
                <UserText text={formatValue(insight.value)} />
              </div>
              <div class="muted small">
                updated{' '}
                <time dateTime={insight.updated_at} title={formatTime(insight.updated_at)}>
                  {ago(insight.updated_at)}
                </time>
              </div>
            </li>
          ))}
        </ul>
      )}
      <CreateInsight namespace={project.namespace} />
    </section>
  );
}

function CreateInsight({ namespace }: { namespace: string }) {
  const [title, setTitle] = useState('');
  const [value, setValue] = useState('0');
  const [emoji, setEmoji] = useState('');
  const client = useQueryClient();
  const mutation = useAction({
    mutationFn: () => {
      const number = Number(value);
      return sb.insights.create(namespace, {
        title,
        value: value.trim() !== '' && Number.isFinite(number) ? number : value,
        ...(emoji ? { emoji } : {}),
      });
    },
    onSuccess: () => {
      setTitle('');
      void invalidateInsights(client, namespace);
    },
  });
  return (
    <section class="panel" aria-labelledby="new-insight">
      <h2 id="new-insight">New insight</h2>
      <Form onSubmit={() => mutation.mutate()} label="New insight" class="form inline">
        <Field label="Title" value={title} onValue={setTitle} required maxLength={100} />
        <Field label="Value" value={value} onValue={setValue} required hint="A number, or text." />
        <Field label="Emoji" value={emoji} onValue={setEmoji} maxLength={32} />
        <ErrorNote error={mutation.error} />
        <button type="submit" disabled={mutation.isPending}>
          Add insight
        </button>
      </Form>
    </section>
  );
}
