/**
 * /reset-password: ask for a link by e-mail; /reset-password?token=… (the link's address): set a new
 * password with it.
 */
import { useAction } from '../mutation.ts';
import { useState } from 'preact/hooks';
import { Link, useSearch } from 'wouter-preact';
import { sb } from '../api.ts';
import { ErrorNote, Field, Form, Notice, PageTitle } from '../ui.tsx';

export default function ResetPassword() {
  const token = new URLSearchParams(useSearch()).get('token');
  return token ? <SetPassword token={token} /> : <RequestLink />;
}

function RequestLink() {
  const [email, setEmail] = useState('');
  const mutation = useAction({ mutationFn: () => sb.auth.requestPasswordReset({ email }) });
  return (
    <section class="narrow">
      <PageTitle title="Reset your password">Reset your password</PageTitle>
      {mutation.isSuccess ? (
        <Notice>If an account has this address, a link to set a new password is on its way. It works once, for an hour.</Notice>
      ) : (
        <Form onSubmit={() => mutation.mutate()} label="Ask for a reset link">
          <Field label="Email" type="email" value={email} onValue={setEmail} autoComplete="email" required autoFocus />
          <ErrorNote error={mutation.error} />
          <button type="submit" disabled={mutation.isPending}>
            Send me a link
          </button>
        </Form>
      )}
      <p>
        <Link href="/login">Back to log in</Link>
      </p>
    </section>
  );
}

function SetPassword({ token }: { token: string }) {
  const [password, setPassword] = useState('');
  const mutation = useAction({ mutationFn: () => sb.auth.confirmPasswordReset({ token, new_password: password }) });
  return (
    <section class="narrow">
      <PageTitle title="Set a new password">Set a new password</PageTitle>
      {mutation.isSuccess ? (
        <Notice>
          Your password is set, and every session of your account has ended. <Link href="/login">Log in</Link> with the new one.
        </Notice>
      ) : (
        <Form onSubmit={() => mutation.mutate()} label="Set a new password">
          <Field
            label="New password"
            type="password"
            value={password}
            onValue={setPassword}
            autoComplete="new-password"
            required
            minLength={8}
            hint="At least 8 characters."
            autoFocus
          />
          <ErrorNote error={mutation.error} />
          <button type="submit" disabled={mutation.isPending}>
            Set password
          </button>
        </Form>
      )}
    </section>
  );
}
