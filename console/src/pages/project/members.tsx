/**
 * /projects/{namespace}/members: who is in the project; invites by username, pending invites,
 * removing members and handing over ownership (the owner), leaving (a member).
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useAction } from '../../mutation.ts';
import { useState } from 'preact/hooks';
import { useLocation } from 'wouter-preact';
import { sb } from '../../api.ts';
import { invalidateProjectInvites, projectInvitesQuery } from '../../queries/invites-queries.ts';
import { projectGone, useInvalidateProject } from '../../queries/projects-queries.ts';
import { useMe } from '../../session.ts';
import { Avatar, Empty, ErrorNote, Field, Form, Notice, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

export default function Members({ project }: ProjectPageProps) {
  const { user } = useMe();
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const isOwner = project.members.some((m) => m.role === 'owner' && m.id === user?.id);
  const refresh = useInvalidateProject(project.namespace);
  const remove = useAction({
    mutationFn: (username: string) => sb.members.remove(project.namespace, username),
    onSuccess: async (_done, username) => {
      if (username === user?.username) {
        await projectGone(client, project.namespace);
        navigate('~/projects');
      } else await refresh();
    },
  });
  const transfer = useAction({
    mutationFn: (username: string) => sb.projects.transferOwnership(project.namespace, { username }),
    onSuccess: refresh,
  });
  return (
    <section>
      <PageTitle title={`${project.name}: members`}>Members</PageTitle>
      <ErrorNote error={remove.error ?? transfer.error} />
      <ul class="rows" aria-label="Members">
        {project.members.map((member) => (
          <li key={member.id} class="row">
            <Avatar src={member.icon} name={member.username} />
            <span class="grow">
              <strong>
                <UserText text={member.username} />
              </strong>{' '}
              <span class="muted">{member.role}</span>
              {member.id === user?.id && <span class="muted"> (you)</span>}
            </span>
            {isOwner && member.role !== 'owner' && (
              <>
                <button
                  type="button"
                  class="secondary"
                  disabled={transfer.isPending}
                  aria-label={`Hand over ownership to ${member.username}`}
                  onClick={() => {
                    if (confirm(`Make ${member.username} the owner of ${project.name}? You stay a member.`))
                      transfer.mutate(member.username);
                  }}
                >
                  Make owner
                </button>
                <button
                  type="button"
                  class="danger"
                  disabled={remove.isPending}
                  aria-label={`Remove ${member.username}`}
                  onClick={() => {
                    if (confirm(`Remove ${member.username} from ${project.name}?`)) remove.mutate(member.username);
                  }}
                >
                  Remove
                </button>
              </>
            )}
            {!isOwner && member.id === user?.id && (
              <button
                type="button"
                class="danger"
                disabled={remove.isPending}
                onClick={() => {
                  if (confirm(`Leave ${project.name}?`)) remove.mutate(member.username);
                }}
              >
                Leave project
              </button>
            )}
          </li>
        ))}
      </ul>
      <Invites namespace={project.namespace} isOwner={isOwner} />
    </section>
  );
}

function Invites({ namespace, isOwner }: { namespace: string; isOwner: boolean }) {
  const client = useQueryClient();
  const invites = useQuery(projectInvitesQuery(namespace));
  const [username, setUsername] = useState('');
  const [sent, setSent] = useState<string | null>(null);
  const invite = useAction({
    mutationFn: () => sb.invites.create(namespace, { username }),
    onSuccess: async () => {
      setSent(username);
      setUsername('');
      await invalidateProjectInvites(client, namespace);
    },
  });
  const cancel = useAction({
    mutationFn: (invitee: string) => sb.invites.delete(namespace, invitee),
    onSuccess: () => invalidateProjectInvites(client, namespace),
  });
  const items = invites.data?.items ?? [];
  return (
    <section class="panel" aria-labelledby="invites">
      <h2 id="invites">Invites</h2>
      {isOwner && (
        <Form onSubmit={() => invite.mutate()} label="Invite someone" class="form inline">
          <Field
            label="Username"
            value={username}
            onValue={setUsername}
            required
            maxLength={32}
            hint="The person signs up first; the invite waits on their projects page."
          />
          <ErrorNote error={invite.error} />
          <button type="submit" disabled={invite.isPending}>
            Invite
          </button>
        </Form>
      )}
      {sent && (
        <Notice>
          Invited <UserText text={sent} />.
        </Notice>
      )}
      <ErrorNote error={invites.error ?? cancel.error} />
      {items.length === 0 ? (
        <Empty>No pending invites.</Empty>
      ) : (
        <ul class="rows" aria-label="Pending invites">
          {items.map((pending) => (
            <li key={pending.id} class="row">
              <Avatar src={pending.user.icon} name={pending.user.username} />
              <span class="grow">
                <strong>
                  <UserText text={pending.user.username} />
                </strong>
                {pending.invited_by && (
                  <span class="muted">
                    {' '}
                    · invited by <UserText text={pending.invited_by.username} />
                  </span>
                )}
              </span>
              {isOwner && (
                <button
                  type="button"
                  class="secondary"
                  disabled={cancel.isPending}
                  aria-label={`Cancel the invite of ${pending.user.username}`}
                  onClick={() => cancel.mutate(pending.user.username)}
                >
                  Cancel invite
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
