/**
 * The shell: the query cache, the router, the header and the routes. Pages are loaded lazily, each
 * in its own chunk, so the first page carries only the shell and the page it shows.
 */
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import type { ComponentChildren } from 'preact';
import { lazy, Suspense } from 'preact/compat';
import { Link, Redirect, Route, Switch, useLocation } from 'wouter-preact';
import { isApiError, statusOf } from './api.ts';
import { cachedMe, meQuery, setMe } from './queries/account-queries.ts';
import { prefetchProjectPage } from './queries/projects-queries.ts';
import { useMe, useSignOut } from './session.ts';
import { prepareFormats } from './format.ts';
import logo from './favicon.svg';
import { Loading } from './ui.tsx';

/** A session that ended meanwhile (logged out elsewhere, revoked, expired): back to the login page. */
const sessionEnded = (error: unknown) => {
  if (isApiError(error, 'unauthenticated') && cachedMe(queryClient)) setMe(queryClient, null);
};

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError: sessionEnded }),
  mutationCache: new MutationCache({ onError: sessionEnded }),
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      // The SDK already retries what is safe to retry; a refusal (4xx) is final.
      retry: (failures, error) => failures < 1 && statusOf(error) >= 500,
      refetchOnWindowFocus: true,
    },
  },
});

const Login = lazy(() => import('./pages/login.tsx'));
const Signup = lazy(() => import('./pages/signup.tsx'));
const ResetPassword = lazy(() => import('./pages/reset-password.tsx'));
const Projects = lazy(() => import('./pages/projects.tsx'));
const loadProjectPages = () => import('./pages/project.tsx');
const ProjectPages = lazy(loadProjectPages);
const Account = lazy(() => import('./pages/account.tsx'));

/** The address last preloaded: a render of the same address asks for nothing again. */
let preloaded: string | undefined;

/**
 * Starts loading a project's page as soon as its address is known: its chunk, and beside it (not
 * after it, nor after the session check) the data it shows first. While those requests are out,
 * the formatters its rows need are made.
 */
function preloadProject(namespace: string) {
  const { pathname, search } = window.location;
  if (preloaded === pathname + search) return;
  preloaded = pathname + search;
  const page = /^\/projects\/[^/]+(.*)$/.exec(pathname)?.[1] ?? '';
  void loadProjectPages();
  prefetchProjectPage(queryClient, namespace, page, search);
  setTimeout(prepareFormats);
}

// Every page shows who is signed in: asked for now, before the first render, rather than when the
// first component that reads it has rendered and its effects have run.
void queryClient.prefetchQuery(meQuery);

export function App() {
  return (
    <QueryClientProvider client={queryClient}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Header />
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading />}>
          <Switch>
            <Route path="/login" component={Login} />
            <Route path="/signup" component={Signup} />
            <Route path="/reset-password" component={ResetPassword} />
            <Route path="/">
              <Signed>
                <Redirect to="/projects" replace />
              </Signed>
            </Route>
            <Route path="/projects">
              <Signed>
                <Projects />
              </Signed>
            </Route>
            <Route path="/projects/:namespace" nest>
              {(params) => {
                preloadProject(params.namespace);
                return (
                  <Signed>
                    <ProjectPages namespace={params.namespace} />
                  </Signed>
                );
              }}
            </Route>
            <Route path="/account">
              <Signed>
                <Account />
              </Signed>
            </Route>
            <Route>
              <NotFound />
            </Route>
          </Switch>
        </Suspense>
      </main>
    </QueryClientProvider>
  );
}

/**
 * Its children for a signed-in person; the login page (coming back here after) for anyone else.
 * Inside a nested route (a project's pages) wouter's locations are relative to the nest, so the way
 * out and the way back are both taken from the whole address: `~/` makes the redirect absolute.
 */
function Signed({ children }: { children: ComponentChildren }) {
  const { user, error, isLoading } = useMe();
  if (isLoading) return <Loading />;
  if (error) return <p role="alert">{error instanceof Error ? error.message : 'The service did not answer.'}</p>;
  if (!user) return <Redirect to={`~/login?next=${encodeURIComponent(window.location.pathname + window.location.search)}`} replace />;
  return <>{children}</>;
}

function Header() {
  const { user } = useMe();
  const signOut = useSignOut();
  const [, navigate] = useLocation();
  return (
    <header class="top">
      <Link href={user ? '/projects' : '/login'} class="brand">
        <img src={logo} alt="" width={24} height={24} /> Signalboard
      </Link>
      {user && (
        <nav aria-label="Main">
          <Link href="/projects">Projects</Link>
          <Link href="/account">Account</Link>
          <button
            type="button"
            class="link-button"
            onClick={() => {
              void signOut().then(() => navigate('/login'));
            }}
          >
            Log out
          </button>
        </nav>
      )}
    </header>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Not found</h1>
      <p>
        Nothing here. <Link href="/projects">Your projects</Link>.
      </p>
    </section>
  );
}
