/** /projects/{namespace}/activity: who changed what in the project, newest first, a page at a time. */
import { useInfiniteQuery } from '@tanstack/react-query';
import { Fragment } from 'preact';
import { ago, formatTime } from '../../format.ts';
import { activityQuery } from '../../queries/activity-queries.ts';
import { Empty, ErrorNote, Loading, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

export default function Activity({ project }: ProjectPageProps) {
  const activity = useInfiniteQuery(activityQuery(project.namespace));
  const entries = activity.data?.pages.flatMap((page) => page.items) ?? [];
  return (
    <section>
      <PageTitle title={`${project.name}: activity`}>Activity</PageTitle>
      <ErrorNote error={activity.error} />
      {activity.isLoading ? (
        <Loading what="Loading activity" />
      ) : entries.length === 0 ? (
        <Empty>Nothing has happened in this project yet.</Empty>
      ) : (
        <ol class="rows activity">
          {entries.map((entry) => (
            <li key={entry.id} class="row">
              <span class="grow">
                <strong>
                  <UserText text={entry.actor?.username ?? 'system'} />
                </strong>{' '}
                <code>{entry.type}</code>
                <span class="muted">
                  {describe(entry.data).map(([key, value], i) => (
                    <Fragment key={key}>
                      {i ? ', ' : ' '}
                      {key}: <UserText text={value} />
                    </Fragment>
                  ))}
                </span>
              </span>
              <time class="muted" dateTime={entry.created_at} title={formatTime(entry.created_at)}>
                {ago(entry.created_at)}
              </time>
            </li>
          ))}
        </ol>
      )}
      {activity.hasNextPage && (
        <button type="button" disabled={activity.isFetchingNextPage} onClick={() => void activity.fetchNextPage()}>
          {activity.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  );
}

/** The entry's data as `[key, value]` texts: each value is someone's text, isolated on its own when shown. */
function describe(data: Record<string, unknown>): [string, string][] {
  return Object.entries(data).map(([key, value]) => [
    key,
    typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value),
  ]);
}
