/** /login: username (or e-mail) and password; the session becomes the service's HttpOnly cookie. */
import { useQueryClient } from '@tanstack/react-query';
import { useAction } from '../mutation.ts';
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { sb } from '../api.ts';
import { signedIn, useMe } from '../session.ts';
import { ErrorNote, Field, Form, Notice, PageTitle } from '../ui.tsx';

/** Where to go after signing in: a path of this console only, never another site. */
export function nextPath(search: string): string {
  const next = new URLSearchParams(search).get('next');
  return next && next.startsWith('/') && !next.startsWith('//') ? next : '/projects';
}

export default function Login() {
  const [login, setLogin] = useState('');
  const [password, setPassword] = useState('');
  const client = useQueryClient();
  const { user } = useMe();
  const search = useSearch();
  const [, navigate] = useLocation();
  const mutation = useAction({
    mutationFn: () => sb.auth.login({ login, password, cookie: true }),
    onSuccess: (grant) => {
      signedIn(client, grant.user);
      navigate(nextPath(search), { replace: true });
    },
  });
  return (
    <section class="narrow">
      <PageTitle title="Log in">Log in</PageTitle>
      {user && (
        <Notice>
          You are signed in as {user.username}: <Link href="/projects">your projects</Link>. Logging in here starts another session.
        </Notice>
      )}
      <Form onSubmit={() => mutation.mutate()} label="Log in">
        <Field label="Username or email" value={login} onValue={setLogin} autoComplete="username" required autoFocus />
        <Field label="Password" type="password" value={password} onValue={setPassword} autoComplete="current-password" required />
        <ErrorNote error={mutation.error} />
        <button type="submit" disabled={mutation.isPending}>
          Log in
        </button>
      </Form>
      <p>
        <Link href="/reset-password">Forgot your password?</Link>
      </p>
      <p>
        New here? Signing up takes an invite link from the service's operator or a teammate: <Link href="/signup">Sign up</Link>.
      </p>
    </section>
  );
}
