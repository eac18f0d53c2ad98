/**
 * /projects/{namespace}/…: the project's header and tabs, and its pages. The feed, the page a
 * project opens on, comes in this chunk (a chunk of its own cost one more round trip before the
 * first row, cold); the others are loaded when first shown (the charts page alone carries uPlot).
 * What the feed shows first is asked for by the shell before this chunk runs (queries/projects-queries.ts).
 */
import { useQuery } from '@tanstack/react-query';
import { lazy, Suspense } from 'preact/compat';
import { Link, Route, Switch, useRoute } from 'wouter-preact';
import { Avatar, ErrorNote, Loading, UserText } from '../ui.tsx';
import Feed from './project/feed.tsx';
import { projectQuery } from '../queries/projects-queries.ts';

const Insights = lazy(() => import('./project/insights.tsx'));
const Charts = lazy(() => import('./project/charts.tsx'));
const Activity = lazy(() => import('./project/activity.tsx'));
const Feeds = lazy(() => import('./project/feeds.tsx'));
const Members = lazy(() => import('./project/members.tsx'));
const Webhooks = lazy(() => import('./project/webhooks.tsx'));
const Settings = lazy(() => import('./project/settings.tsx'));

export function useProject(namespace: string) {
  return useQuery(projectQuery(namespace));
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
          <div class="project-name">
            <UserText text={project.name} />
          </div>
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
