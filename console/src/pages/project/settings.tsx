/** /projects/{namespace}/settings: name and namespace, icon, billing (the owner) and deletion. */
import { useQueryClient } from '@tanstack/react-query';
import { useAction } from '../../mutation.ts';
import { useState } from 'preact/hooks';
import { useLocation } from 'wouter-preact';
import { errorMessage, isApiError, sb, statusOf } from '../../api.ts';
import { projectChanged, projectGone } from '../../queries/projects-queries.ts';
import { useMe } from '../../session.ts';
import { ErrorNote, Field, Form, IconPicker, Notice, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

export default function Settings({ project }: ProjectPageProps) {
  const { user } = useMe();
  const isOwner = project.members.some((m) => m.role === 'owner' && m.id === user?.id);
  return (
    <section>
      <PageTitle title={`${project.name}: settings`}>Settings</PageTitle>
      {isOwner ? (
        <>
          <Rename project={project} />
          <Icon project={project} />
          <Billing project={project} />
          <DeleteProject project={project} />
        </>
      ) : (
        <p>
          Only the project's owner, <UserText text={project.members.find((m) => m.role === 'owner')?.username ?? 'who created it'} />,
          changes its name, icon and billing. You can leave the project on its Members page.
        </p>
      )}
    </section>
  );
}

function Rename({ project }: ProjectPageProps) {
  const [name, setName] = useState(project.name);
  const [namespace, setNamespace] = useState(project.namespace);
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const mutation = useAction({
    mutationFn: () =>
      sb.projects.update(project.namespace, {
        ...(name !== project.name ? { name } : {}),
        ...(namespace !== project.namespace ? { namespace } : {}),
      }),
    onSuccess: async (updated) => {
      await projectChanged(client, updated);
      if (updated.namespace !== project.namespace) navigate(`~/projects/${updated.namespace}/settings`, { replace: true });
    },
  });
  return (
    <section class="panel" aria-labelledby="rename">
      <h2 id="rename">Name and address</h2>
      <Form onSubmit={() => mutation.mutate()} label="Rename the project">
        <Field label="Name" value={name} onValue={setName} required maxLength={100} />
        <Field
          label="Namespace"
          value={namespace}
          onValue={setNamespace}
          required
          minLength={3}
          maxLength={40}
          pattern="[a-z0-9][a-z0-9\-]{1,38}[a-z0-9]"
          hint="A new namespace takes effect at once: the old address stops working, for API calls too."
        />
        <ErrorNote error={mutation.error} />
        {mutation.isSuccess && <Notice>Saved.</Notice>}
        <button type="submit" disabled={mutation.isPending}>
          Save
        </button>
      </Form>
    </section>
  );
}

function Icon({ project }: ProjectPageProps) {
  const [icon, setIcon] = useState<string | null>(null);
  const client = useQueryClient();
  const mutation = useAction({
    mutationFn: (value: string | null) => sb.projects.update(project.namespace, { icon: value }),
    onSuccess: async (updated) => {
      setIcon(null);
      await projectChanged(client, updated);
    },
  });
  return (
    <section class="panel" aria-labelledby="icon">
      <h2 id="icon">Icon</h2>
      <Form onSubmit={() => icon && mutation.mutate(icon)} label="Change the icon">
        <IconPicker label="New icon" value={icon} onValue={setIcon} current={project.icon} />
        <ErrorNote error={mutation.error} />
        <div class="buttons">
          <button type="submit" disabled={!icon || mutation.isPending}>
            Save icon
          </button>
          {project.icon && (
            <button type="button" class="secondary" disabled={mutation.isPending} onClick={() => mutation.mutate(null)}>
              Remove icon
            </button>
          )}
        </div>
      </Form>
    </section>
  );
}

function Billing({ project }: ProjectPageProps) {
  const [tier, setTier] = useState('1');
  const [off, setOff] = useState(false);
  const go = (url: string) => window.location.assign(url);
  const onError = (error: unknown) => {
    if (statusOf(error) === 503 && isApiError(error, 'unavailable')) setOff(true);
  };
  const checkout = useAction({
    mutationFn: () => sb.billing.checkout(project.namespace, { tier: Number(tier) }),
    onSuccess: (s) => go(s.url),
    onError,
  });
  const portal = useAction({ mutationFn: () => sb.billing.portal(project.namespace), onSuccess: (s) => go(s.url), onError });
  const error = checkout.error ?? portal.error;
  return (
    <section class="panel" aria-labelledby="billing">
      <h2 id="billing">Billing</h2>
      <p>
        Plan: <strong>{project.tier === 0 ? 'Free (tier 0)' : `Tier ${project.tier}`}</strong>
        {project.billing_id ? ' · subscribed' : ''}
      </p>
      {off ? (
        <p class="notice" role="status">
          Billing is unavailable on this service: its operator has not set it up. {error ? errorMessage(error) : ''}
        </p>
      ) : (
        <>
          <ErrorNote error={error} />
          {project.billing_id ? (
            <button type="button" disabled={portal.isPending} onClick={() => portal.mutate()}>
              Manage billing
            </button>
          ) : (
            <Form onSubmit={() => checkout.mutate()} label="Start a paid plan" class="form inline">
              <Field label="Tier" type="number" min={1} step={1} value={tier} onValue={setTier} required />
              <button type="submit" disabled={checkout.isPending}>
                Upgrade
              </button>
            </Form>
          )}
        </>
      )}
    </section>
  );
}

function DeleteProject({ project }: ProjectPageProps) {
  const [typed, setTyped] = useState('');
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const mutation = useAction({
    mutationFn: () => sb.projects.delete(project.namespace),
    onSuccess: async () => {
      await projectGone(client, project.namespace);
      navigate('~/projects', { replace: true });
    },
  });
  return (
    <section class="panel danger-zone" aria-labelledby="delete-project">
      <h2 id="delete-project">Delete the project</h2>
      <p>Its feeds, events, insights, members and API token grants go with it, and its subscription is cancelled. This cannot be undone.</p>
      <Form onSubmit={() => mutation.mutate()} label="Delete the project">
        <Field label={`Type ${project.namespace} to confirm`} value={typed} onValue={setTyped} autoComplete="off" />
        <ErrorNote error={mutation.error} />
        <button type="submit" class="danger" disabled={typed !== project.namespace || mutation.isPending}>
          Delete project
        </button>
      </Form>
    </section>
  );
}
