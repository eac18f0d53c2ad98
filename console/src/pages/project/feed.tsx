/**
 * /projects/{namespace}: the live feed. History comes a page at a time from `events.list` (the
 * query cache, "Load more" follows the cursor); new events arrive on the live stream, are filtered
 * here as the service would, and go on top. Only the rows in view are rendered.
 */
import { useInfiniteQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { useSearchParams } from 'wouter-preact';
import type { Event } from '../../api.ts';
import { Empty, ErrorNote, Field, Form, isolatedText, Loading, PageTitle } from '../../ui.tsx';
import { filtersOf, historyQuery, keepFirstHistoryPage } from '../../queries/events-queries.ts';
import type { ProjectPageProps } from './page-props.ts';
import { EventList } from './event-list.tsx';
import { matches, type Filters } from './filters.ts';
import { useLiveEvents } from './live.ts';
import { useNotifications } from './notify.tsx';

export default function FeedPage({ project }: ProjectPageProps) {
  const [params, setParams] = useSearchParams();
  const filters = filtersOf(params);
  const filterKey = JSON.stringify(filters);
  const history = useInfiniteQuery(historyQuery(project.namespace, filters));
  const notifications = useNotifications();
  const live = useLiveEvents(project.namespace, notifications.tell);

  // Live events left the list for its cap: read the history again from its first page, so that
  // "Load more" goes on from the newest events and reaches those too.
  const client = useQueryClient();
  useEffect(() => {
    if (live.dropped === 0) return;
    keepFirstHistoryPage(client, project.namespace, filters);
    void history.refetch();
  }, [live.dropped]);

  const events = useMemo(() => {
    const seen = new Set<string>();
    const list: Event[] = [];
    for (const event of live.events) {
      if (!seen.has(event.id) && matches(event, filters)) {
        seen.add(event.id);
        list.push(event);
      }
    }
    for (const page of history.data?.pages ?? [])
      for (const event of page.items)
        if (!seen.has(event.id)) {
          seen.add(event.id);
          list.push(event);
        }
    return list;
  }, [live.events, history.data, filterKey]);

  /** The next page that brings an event not in the list yet (pages of events already shown are skipped, up to 200). */
  const loadMore = async () => {
    const before = new Set(events.map((e) => e.id));
    for (let page = 0; page < 200; page++) {
      const result = await history.fetchNextPage();
      const last = result.data?.pages.at(-1);
      if (!last || !result.hasNextPage || last.items.some((e) => !before.has(e.id))) return;
    }
  };

  return (
    <section>
      <PageTitle title={`${project.name}: live feed`}>Live feed</PageTitle>
      <FilterForm
        project={project}
        filters={filters}
        onApply={(next) => {
          const search = new URLSearchParams();
          if (next.feed) search.set('feed', next.feed);
          for (const tag of next.tag) search.append('tag', tag);
          if (next.user_id) search.set('user_id', next.user_id);
          if (next.q) search.set('q', next.q);
          setParams(search);
        }}
      />
      <div class="live-bar">
        <p class={`live-status ${live.status}`} role="status">
          {live.status === 'live'
            ? 'Live: new events appear at the top.'
            : live.status === 'connecting'
              ? 'Connecting to the live stream…'
              : live.status === 'reconnecting'
                ? 'Connection lost: reconnecting…'
                : 'The live stream stopped.'}
        </p>
        {notifications.control}
      </div>
      {live.problem && (
        <p class="error" role="alert">
          {live.problem}
        </p>
      )}
      <ErrorNote error={history.error} />
      {history.isLoading ? (
        <Loading what="Loading events" />
      ) : events.length === 0 ? (
        <Empty>
          {filterKey === JSON.stringify({ tag: [] })
            ? 'No events yet. Publish one with an API token (see API tokens) and it appears here at once.'
            : 'No events match these filters.'}
        </Empty>
      ) : (
        <EventList events={events} />
      )}
      {history.hasNextPage && (
        <button type="button" class="load-more" disabled={history.isFetchingNextPage} onClick={() => void loadMore()}>
          {history.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  );
}

function FilterForm({ project, filters, onApply }: ProjectPageProps & { filters: Filters; onApply: (filters: Filters) => void }) {
  const [feed, setFeed] = useState(filters.feed ?? '');
  const [tag, setTag] = useState(filters.tag.join(' '));
  const [user, setUser] = useState(filters.user_id ?? '');
  const [q, setQ] = useState(filters.q ?? '');
  const active = [filters.feed, filters.user_id, filters.q].filter(Boolean).length + filters.tag.length;
  // Open on wide screens and whenever filters are set; a phone starts with the events in view.
  const [open, setOpen] = useState(() => active > 0 || matchMedia('(min-width: 700px)').matches);
  const apply = (feedName = feed) =>
    onApply({
      feed: feedName || undefined,
      tag: tag.split(/\s+/).filter(Boolean),
      user_id: user.trim() || undefined,
      q: q.trim() || undefined,
    });
  return (
    <details class="filter-panel" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Filters{active ? ` (${active} active)` : ''}</summary>
      <Form onSubmit={() => apply()} label="Filter events" class="filters">
        <div class="field">
          <label for="filter-feed">Feed</label>
          <select
            id="filter-feed"
            value={feed}
            onChange={(e) => {
              setFeed(e.currentTarget.value);
              apply(e.currentTarget.value);
            }}
          >
            <option value="">All feeds</option>
            {project.feeds.map((f) => (
              <option key={f.id} value={f.name}>
                {f.emoji ? `${isolatedText(f.emoji)} ` : ''}
                {f.name}
              </option>
            ))}
          </select>
        </div>
        <Field label="Tag" value={tag} onValue={setTag} placeholder="plan:pro" />
        <Field label="User (user_id)" value={user} onValue={setUser} maxLength={160} />
        <Field label="Search" type="search" value={q} onValue={setQ} maxLength={200} placeholder="refund" />
        <div class="filter-buttons">
          <button type="submit">Filter</button>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setFeed('');
              setTag('');
              setUser('');
              setQ('');
              onApply({ tag: [] });
            }}
          >
            Clear
          </button>
        </div>
        <small class="hint filter-hint">
          Tags as key:value (several, separated by spaces, must all match); search finds whole words in the title or description.
        </small>
      </Form>
    </details>
  );
}
