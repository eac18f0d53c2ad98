/** /projects/{namespace}/feeds: the project's feeds; create, edit and delete them. */
import { useAction } from '../../mutation.ts';
import { useState } from 'preact/hooks';
import { sb, type Feed } from '../../api.ts';
import { useInvalidateProject } from '../../queries/projects-queries.ts';
import { Emoji, ErrorNote, Field, Form, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

export default function Feeds({ project }: ProjectPageProps) {
  return (
    <section>
      <PageTitle title={`${project.name}: feeds`}>Feeds</PageTitle>
      <p class="muted">
        Events are published to a feed: <code>{`events.publish('${project.namespace}', 'feed-name', …)`}</code>.
      </p>
      <ul class="rows" aria-label="Feeds">
        {project.feeds.map((feed) => (
          <FeedRow key={feed.id} namespace={project.namespace} feed={feed} />
        ))}
      </ul>
      <CreateFeed namespace={project.namespace} />
    </section>
  );
}

function FeedRow({ namespace, feed }: { namespace: string; feed: Feed }) {
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(feed.name);
  const [description, setDescription] = useState(feed.description ?? '');
  const [emoji, setEmoji] = useState(feed.emoji ?? '');
  const refresh = useInvalidateProject(namespace);
  const update = useAction({
    mutationFn: () =>
      sb.feeds.update(namespace, feed.name, {
        ...(name !== feed.name ? { name } : {}),
        description: description || null,
        emoji: emoji || null,
      }),
    onSuccess: async () => {
      await refresh();
      setEditing(false);
    },
  });
  const remove = useAction({ mutationFn: () => sb.feeds.delete(namespace, feed.name), onSuccess: refresh });
  if (editing)
    return (
      <li class="row">
        <Form onSubmit={() => update.mutate()} label={`Edit feed ${feed.name}`} class="form inline grow">
          <Field label="Feed name" value={name} onValue={setName} required maxLength={40} pattern="[a-z0-9]([a-z0-9\-]{0,38}[a-z0-9])?" />
          <Field label="Description" value={description} onValue={setDescription} maxLength={500} />
          <Field label="Emoji" value={emoji} onValue={setEmoji} maxLength={32} />
          <ErrorNote error={update.error} />
          <button type="submit" disabled={update.isPending}>
            Save
          </button>
          <button type="button" class="secondary" onClick={() => setEditing(false)}>
            Cancel
          </button>
        </Form>
      </li>
    );
  return (
    <li class="row">
      <Emoji class="feed-emoji" text={feed.emoji} fallback="#" />
      <span class="grow">
        <strong>
          <UserText text={feed.name} />
        </strong>
        {feed.description && (
          <span class="muted">
            {' '}
            · <UserText text={feed.description} />
          </span>
        )}
      </span>
      <ErrorNote error={remove.error} />
      <button type="button" class="secondary" aria-label={`Edit feed ${feed.name}`} onClick={() => setEditing(true)}>
        Edit
      </button>
      <button
        type="button"
        class="danger"
        aria-label={`Delete feed ${feed.name}`}
        disabled={remove.isPending}
        onClick={() => {
          if (confirm(`Delete the feed ${feed.name} and all its events?`)) remove.mutate();
        }}
      >
        Delete
      </button>
    </li>
  );
}

function CreateFeed({ namespace }: { namespace: string }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [emoji, setEmoji] = useState('');
  const refresh = useInvalidateProject(namespace);
  const create = useAction({
    mutationFn: () => sb.feeds.create(namespace, { name, ...(description ? { description } : {}), ...(emoji ? { emoji } : {}) }),
    onSuccess: async () => {
      await refresh();
      setName('');
      setDescription('');
      setEmoji('');
    },
  });
  return (
    <section class="panel" aria-labelledby="new-feed">
      <h2 id="new-feed">New feed</h2>
      <Form onSubmit={() => create.mutate()} label="New feed" class="form inline">
        <Field
          label="Name"
          value={name}
          onValue={setName}
          required
          maxLength={40}
          pattern="[a-z0-9]([a-z0-9\-]{0,38}[a-z0-9])?"
          hint="Lower-case letters, digits and hyphens."
        />
        <Field label="Description" value={description} onValue={setDescription} maxLength={500} />
        <Field label="Emoji" value={emoji} onValue={setEmoji} maxLength={32} />
        <ErrorNote error={create.error} />
        <button type="submit" disabled={create.isPending}>
          Create feed
        </button>
      </Form>
    </section>
  );
}
