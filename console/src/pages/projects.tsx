/** /projects: the projects one is a member of, a new one, and the invites received. */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useAction } from '../mutation.ts';
import { useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { sb } from '../api.ts';
import { invalidateReceivedInvites, receivedInvitesQuery } from '../queries/invites-queries.ts';
import { invalidateProjects, projectsQuery } from '../queries/projects-queries.ts';
import { useMe } from '../session.ts';
import { Avatar, Empty, ErrorNote, Field, Form, IconPicker, Loading, PageTitle, UserText } from '../ui.tsx';

export default function Projects() {
  return (
    <section>
      <PageTitle title="Projects">Projects</PageTitle>
      <ReceivedInvites />
      <ProjectList />
      <CreateProject />
    </section>
  );
}

function ProjectList() {
  const projects = useQuery(projectsQuery);
  if (projects.isLoading) return <Loading what="Loading projects" />;
  if (projects.error) return <ErrorNote error={projects.error} />;
  const items = projects.data?.items ?? [];
  if (items.length === 0) return <Empty>No projects yet: create the first one below.</Empty>;
  return (
    <ul class="cards" aria-label="Your projects">
      {items.map((project) => (
        <li key={project.id} class="card project-card">
          <Avatar src={project.icon} name={project.name} size={40} />
          <div>
            <Link href={`/projects/${project.namespace}`} class="card-title">
              <UserText text={project.name} />
            </Link>
            <div class="muted">
              {project.namespace} · {project.members.length} {project.members.length === 1 ? 'member' : 'members'} · {project.feeds.length}{' '}
              {project.feeds.length === 1 ? 'feed' : 'feeds'}
            </div>
          </div>
        </li>
      ))}
    </ul>
  );
}

function CreateProject() {
  const [name, setName] = useState('');
  const [namespace, setNamespace] = useState('');
  const [touched, setTouched] = useState(false);
  const [icon, setIcon] = useState<string | null>(null);
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const mutation = useAction({
    mutationFn: () => sb.projects.create({ name, namespace, ...(icon ? { icon } : {}) }),
    onSuccess: (project) => {
      void invalidateProjects(client);
      navigate(`/projects/${project.namespace}`);
    },
  });
  return (
    <section class="panel" aria-labelledby="create-project">
      <h2 id="create-project">Create a project</h2>
      <Form onSubmit={() => mutation.mutate()} label="Create a project">
        <Field
          label="Name"
          value={name}
          onValue={(value) => {
            setName(value);
            if (!touched) setNamespace(slug(value));
          }}
          required
          maxLength={100}
        />
        <Field
          label="Namespace"
          value={namespace}
          onValue={(value) => {
            setTouched(true);
            setNamespace(value);
          }}
          required
          minLength={3}
          maxLength={40}
          pattern="[a-z0-9][a-z0-9\-]{1,38}[a-z0-9]"
          hint="Lower-case letters, digits and hyphens, 3–40 characters: the project's address."
        />
        <IconPicker label="Icon" value={icon} onValue={setIcon} />
        <ErrorNote error={mutation.error} />
        <button type="submit" disabled={mutation.isPending}>
          Create
        </button>
      </Form>
    </section>
  );
}

function slug(name: string): string {
  return name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
}

function ReceivedInvites() {
  const { user } = useMe();
  const client = useQueryClient();
  const invites = useQuery(receivedInvitesQuery);
  const answer = useAction({
    mutationFn: ({ namespace, accept }: { namespace: string; accept: boolean }) =>
      accept ? sb.invites.accept(namespace, user!.username) : sb.invites.delete(namespace, user!.username),
    onSuccess: () => {
      void invalidateReceivedInvites(client);
      void invalidateProjects(client);
    },
  });
  const items = invites.data?.items ?? [];
  if (items.length === 0 && !invites.error) return null;
  return (
    <section class="panel" aria-labelledby="received-invites">
      <h2 id="received-invites">Invites for you</h2>
      <ErrorNote error={invites.error ?? answer.error} />
      <ul class="rows">
        {items.map((invite) => (
          <li key={invite.project.namespace} class="row">
            <Avatar src={invite.project.icon} name={invite.project.name} />
            <span class="grow">
              <strong>
                <UserText text={invite.project.name} />
              </strong>{' '}
              ({invite.project.namespace})
              {invite.invited_by && (
                <span class="muted">
                  {' '}
                  · from <UserText text={invite.invited_by.username} />
                </span>
              )}
            </span>
            <button
              type="button"
              disabled={answer.isPending}
              onClick={() => answer.mutate({ namespace: invite.project.namespace, accept: true })}
            >
              Accept
            </button>
            <button
              type="button"
              class="secondary"
              disabled={answer.isPending}
              onClick={() => answer.mutate({ namespace: invite.project.namespace, accept: false })}
            >
              Decline
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
