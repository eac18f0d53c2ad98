/** /account: the signed-in account: username, icon, e-mail, password, API tokens, sessions, logging out and deleting it. */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useAction } from '../mutation.ts';
import { useState } from 'preact/hooks';
import { useLocation } from 'wouter-preact';
import { sb, type User } from '../api.ts';
import { ago, formatTime } from '../format.ts';
import { invalidateSessions, sessionsQuery, setMe } from '../queries/account-queries.ts';
import { invalidateEveryProject } from '../queries/projects-queries.ts';
import { signedIn, useMe, useSignOut } from '../session.ts';
import { ErrorNote, Field, Form, IconPicker, Loading, Notice, PageTitle, UserText } from '../ui.tsx';
import { TokensSection } from './tokens.tsx';

export default function Account() {
  const { user } = useMe();
  const signOut = useSignOut();
  const [, navigate] = useLocation();
  if (!user) return <Loading />;
  return (
    <section>
      <PageTitle title="Account">Account</PageTitle>
      <p>
        Signed in as{' '}
        <strong>
          <UserText text={user.username} />
        </strong>{' '}
        (<UserText text={user.email} />
        ). <a href="#api-tokens">API tokens</a>
      </p>
      <button type="button" onClick={() => void signOut().then(() => navigate('/login'))}>
        Log out
      </button>
      <Profile user={user} />
      <TokensSection />
      <Email />
      <Password />
      <Sessions />
      <DeleteAccount />
    </section>
  );
}

function Profile({ user }: { user: User }) {
  const [username, setUsername] = useState(user.username);
  const [icon, setIcon] = useState<string | null>(null);
  const client = useQueryClient();
  const mutation = useAction({
    mutationFn: (body: { username?: string; icon?: string | null }) => sb.users.update(body),
    onSuccess: (updated) => {
      setIcon(null);
      setMe(client, updated);
      void invalidateEveryProject(client);
    },
  });
  return (
    <section class="panel" aria-labelledby="profile">
      <h2 id="profile">Profile</h2>
      <Form
        onSubmit={() => mutation.mutate({ ...(username !== user.username ? { username } : {}), ...(icon ? { icon } : {}) })}
        label="Profile"
      >
        <Field label="Username" value={username} onValue={setUsername} required minLength={3} maxLength={32} autoComplete="username" />
        <IconPicker label="Icon" value={icon} onValue={setIcon} current={user.icon} />
        <ErrorNote error={mutation.error} />
        {mutation.isSuccess && <Notice>Saved.</Notice>}
        <div class="buttons">
          <button type="submit" disabled={mutation.isPending}>
            Save profile
          </button>
          {user.icon && (
            <button type="button" class="secondary" disabled={mutation.isPending} onClick={() => mutation.mutate({ icon: null })}>
              Remove icon
            </button>
          )}
        </div>
      </Form>
    </section>
  );
}

function Email() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const mutation = useAction({
    mutationFn: () => sb.users.changeEmail({ email, current_password: password }),
    onSuccess: () => setPassword(''),
  });
  return (
    <section class="panel" aria-labelledby="email">
      <h2 id="email">E-mail address</h2>
      <Form onSubmit={() => mutation.mutate()} label="Change the e-mail address">
        <Field label="New email" type="email" value={email} onValue={setEmail} required maxLength={254} autoComplete="email" />
        <Field label="Current password" type="password" value={password} onValue={setPassword} required autoComplete="current-password" />
        <ErrorNote error={mutation.error} />
        {mutation.isSuccess && <Notice>A link to confirm the change is on its way to the new address.</Notice>}
        <button type="submit" disabled={mutation.isPending}>
          Change email
        </button>
      </Form>
    </section>
  );
}

function Password() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const client = useQueryClient();
  const mutation = useAction({
    mutationFn: () => sb.users.changePassword({ current_password: current, new_password: next }),
    onSuccess: () => {
      setCurrent('');
      setNext('');
      void invalidateSessions(client);
    },
  });
  return (
    <section class="panel" aria-labelledby="password">
      <h2 id="password">Password</h2>
      <Form onSubmit={() => mutation.mutate()} label="Change the password">
        <Field label="Current password" type="password" value={current} onValue={setCurrent} required autoComplete="current-password" />
        <Field label="New password" type="password" value={next} onValue={setNext} required minLength={8} autoComplete="new-password" />
        <ErrorNote error={mutation.error} />
        {mutation.isSuccess && <Notice>Password changed. Your other sessions have ended.</Notice>}
        <button type="submit" disabled={mutation.isPending}>
          Change password
        </button>
      </Form>
    </section>
  );
}

function Sessions() {
  const client = useQueryClient();
  const sessions = useQuery(sessionsQuery);
  const [, navigate] = useLocation();
  const revoke = useAction({
    mutationFn: (id: string) => sb.sessions.delete(id),
    onSuccess: (_done, id) => {
      if (sessions.data?.items.find((s) => s.id === id)?.current) {
        signedIn(client, null);
        navigate('/login');
      } else void invalidateSessions(client);
    },
  });
  return (
    <section class="panel" aria-labelledby="sessions">
      <h2 id="sessions">Sessions</h2>
      <ErrorNote error={sessions.error ?? revoke.error} />
      {sessions.isLoading ? (
        <Loading what="Loading sessions" />
      ) : (
        <ul class="rows" aria-label="Sessions">
          {(sessions.data?.items ?? []).map((session) => (
            <li key={session.id} class="row">
              <span class="grow">
                <strong>{session.current ? 'This browser' : <UserText text={browserName(session.user_agent)} />}</strong>
                <span class="muted">
                  {' '}
                  · {session.ip ?? 'unknown address'} · opened {formatTime(session.created_at)} · last used{' '}
                  <time dateTime={session.last_used_at}>{ago(session.last_used_at)}</time>
                </span>
              </span>
              <button
                type="button"
                class="secondary"
                disabled={revoke.isPending}
                aria-label={
                  session.current ? 'Revoke this session (log out)' : `Revoke the session from ${session.ip ?? 'unknown address'}`
                }
                onClick={() => revoke.mutate(session.id)}
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

function browserName(agent: string | null): string {
  if (!agent) return 'Unknown device';
  const match = /(Firefox|Edg|Chrome|Chromium|Safari|curl|node)[/ ]?[\d.]*/.exec(agent);
  return match ? match[0] : agent.slice(0, 60);
}

function DeleteAccount() {
  const [password, setPassword] = useState('');
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const mutation = useAction({
    mutationFn: () => sb.users.deleteMe({ password }),
    onSuccess: () => {
      signedIn(client, null);
      navigate('/login', { replace: true });
    },
  });
  return (
    <section class="panel danger-zone" aria-labelledby="delete-account">
      <h2 id="delete-account">Delete the account</h2>
      <p>The projects you own alone go with it. Hand them over first to keep them.</p>
      <Form onSubmit={() => mutation.mutate()} label="Delete the account">
        <Field
          label="Password to confirm"
          type="password"
          value={password}
          onValue={setPassword}
          required
          autoComplete="current-password"
        />
        <ErrorNote error={mutation.error} />
        <button type="submit" class="danger" disabled={mutation.isPending}>
          Delete account
        </button>
      </Form>
    </section>
  );
}
