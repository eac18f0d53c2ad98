/** /signup?invite=CODE: a new account with an invite code, signed in at once (the cookie). */
import { useQueryClient } from '@tanstack/react-query';
import { useAction } from '../mutation.ts';
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { sb } from '../api.ts';
import { signedIn, useMe } from '../session.ts';
import { ErrorNote, Field, Form, Notice, PageTitle } from '../ui.tsx';

export default function Signup() {
  const search = useSearch();
  const [username, setUsername] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [invite, setInvite] = useState(() => new URLSearchParams(search).get('invite') ?? '');
  const client = useQueryClient();
  const { user } = useMe();
  const [, navigate] = useLocation();
  const mutation = useAction({
    mutationFn: () => sb.auth.signup({ username, email, password, invite, cookie: true }),
    onSuccess: (grant) => {
      signedIn(client, grant.user);
      navigate('/projects', { replace: true });
    },
  });
  return (
    <section class="narrow">
      <PageTitle title="Sign up">Sign up</PageTitle>
      {user && (
        <Notice>
          You are signed in as {user.username}: <Link href="/projects">your projects</Link>. Log out first to sign up another account.
        </Notice>
      )}
      <Form onSubmit={() => mutation.mutate()} label="Sign up">
        <Field
          label="Username"
          value={username}
          onValue={setUsername}
          autoComplete="username"
          required
          minLength={3}
          maxLength={32}
          pattern="[A-Za-z0-9_\-]{3,32}"
          hint="3–32 letters, digits, _ and -."
          autoFocus
        />
        <Field label="Email" type="email" value={email} onValue={setEmail} autoComplete="email" required maxLength={254} />
        <Field
          label="Password"
          type="password"
          value={password}
          onValue={setPassword}
          autoComplete="new-password"
          required
          minLength={8}
          hint="At least 8 characters."
        />
        <Field label="Invite code" value={invite} onValue={setInvite} required maxLength={100} autoComplete="off" />
        <ErrorNote error={mutation.error} />
        <button type="submit" disabled={mutation.isPending}>
          Sign up
        </button>
      </Form>
      <p>
        Already have an account? <Link href="/login">Log in</Link>.
      </p>
    </section>
  );
}
