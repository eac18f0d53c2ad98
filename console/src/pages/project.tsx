/**
 * /projects/{namespace}/…: the project's header and tabs, and its pages. The feed, the page a
 * project opens on, comes in this chunk, so that its events are asked for as soon as the chunk is
 * here (`preload`; a chunk of its own cost one more round trip before the first row, cold); the
 * others are loaded when first shown (the charts page alone carries uPlot).
 */
import { useQuery, type QueryClient } from '@tanstack/react-query';
import { lazy, Suspense } from 'preact/compat';
import { Link, Route, Switch, useRoute } from 'wouter-preact';
import { sb, type Project } from '../api.ts';
import { Avatar, ErrorNote, Loading } from '../ui.tsx';
import Feed, { filtersOf, historyQuery } from './project/feed.tsx';

const Insights = lazy(() => import('./project/insights.tsx'));
const Charts = lazy(() => import('./project/charts.tsx'));
const Activity = lazy(() => import('./project/activity.tsx'));
const Feeds = lazy(() => import('./project/feeds.tsx'));
const Members = lazy(() => import('./project/members.tsx'));
const Webhooks = lazy(() => import('./project/webhooks.tsx'));
const Settings = lazy(() => import('./project/settings.tsx'));

export const projectKey = (namespace: string) => ['project', namespace] as const;

const projectQuery = (namespace: string) => ({ queryKey: projectKey(namespace), queryFn: () => sb.projects.get(namespace) });

export function useProject(namespace: string) {
  return useQuery(projectQuery(namespace));
}

/**
 * Asks for what a project's page shows first: the project, and on the live feed (`page` is the
 * address after `/projects/{namespace}`, empty for the feed) its first page of events. The shell
 * calls it as soon as it has this chunk, beside the session check rather than after it: cold, the
 * first row then waits for one round trip after the chunk instead of three.
 */
export function preload(client: QueryClient, namespace: string, page: string, search: string): void {
  void client.prefetchQuery(projectQuery(namespace));
  if (page === '' || page === '/') void client.prefetchInfiniteQuery(historyQuery(namespace, filtersOf(new URLSearchParams(search))));
}

/** Props of every page of a project. */
export interface ProjectPageProps {
  project: Project;
}

const TABS = [
  ['', 'Live feed'],
  ['/insights', 'Insights'],
  ['/charts', 'Charts'],
  ['/activity', 'Activity'],
  ['/feeds', 'Feeds'],
  ['/members', 'Members'],
  ['/webhooks', 'Webhooks'],
  ['/settings', 'Settings'],
] as const;

export default function ProjectPages({ namespace }: { namespace: string }) {
  const query = useProject(namespace);
  if (query.isLoading) return <Loading what="Loading the project" />;
  if (query.error || !query.data)
    return (
      <section>
        <h1>Project {namespace}</h1>
        <ErrorNote error={query.error} />
        <Link href="~/projects">Your projects</Link>
      </section>
    );
  const project = query.data;
  return (
    <div class="project">
      <div class="project-head">
        <Avatar src={project.icon} name={project.name} size={36} />
        <div>
          <div class="project-name">{project.name}</div>
          <div class="muted">{project.namespace}</div>
        </div>
      </div>
      <nav class="tabs" aria-label="Project">
        {TABS.map(([path, label]) => (
          <Tab key={path} path={path} label={label} />
        ))}
      </nav>
      <Suspense fallback={<Loading />}>
        <Switch>
          <Route path="/">
            <Feed project={project} />
          </Route>
          <Route path="/insights">
            <Insights project={project} />
          </Route>
          <Route path="/charts">
            <Charts project={project} />
          </Route>
          <Route path="/activity">
            <Activity project={project} />
          </Route>
          <Route path="/feeds">
            <Feeds project={project} />
          </Route>
          <Route path="/members">
            <Members project={project} />
          </Route>
          <Route path="/webhooks">
            <Webhooks project={project} />
          </Route>
          <Route path="/settings">
            <Settings project={project} />
          </Route>
          <Route>
            <p>No such page in this project.</p>
          </Route>
        </Switch>
      </Suspense>
    </div>
  );
}

function Tab({ path, label }: { path: string; label: string }) {
  const [active] = useRoute(path || '/');
  return (
    <Link href={path || '/'} aria-current={active ? 'page' : undefined} class={active ? 'tab active' : 'tab'}>
      {label}
    </Link>
  );
}
