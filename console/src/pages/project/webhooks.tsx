/**
 * /projects/{namespace}/webhooks: the project's webhook endpoints. Create one (its signing secret
 * is shown once, with a copy button), turn it off and on, send a test, rotate the secret, delete
 * it, and read its deliveries with their attempts, a page at a time, sending one again.
 */
import { useInfiniteQuery, useQuery, useQueryClient } from '@tanstack/react-query';
import type { ComponentChildren } from 'preact';
import { useId, useState } from 'preact/hooks';
import { sb, type Project, type Schemas } from '../../api.ts';
import { ago, formatDuration, formatTime, formatValue } from '../../format.ts';
import { useAction } from '../../mutation.ts';
import { serviceQuery } from '../../queries/service-queries.ts';
import { deliveriesQuery, invalidateDeliveries, useInvalidateWebhooks, webhooksQuery } from '../../queries/webhooks-queries.ts';
import { Empty, ErrorNote, Field, Form, Loading, PageTitle, UserText } from '../../ui.tsx';
import type { ProjectPageProps } from './page-props.ts';

type Webhook = Schemas['WebhookEndpoint'];
type Format = Schemas['WebhookFormat'];
type Delivery = Schemas['WebhookDelivery'];
type TestResult = Schemas['WebhookTestResult'];
type WebhookLimits = Schemas['WebhookLimits'];

const FORMATS: { value: Format; label: string }[] = [
  { value: 'standard', label: 'Standard Webhooks (signed JSON)' },
  { value: 'slack', label: 'Slack incoming webhook' },
  { value: 'discord', label: 'Discord webhook' },
];

/**
 * Why the service turned an endpoint off (`disabled_reason`), as people read it, with the limits
 * the service says it applies (`GET /v1`; unknown while that answer is awaited).
 */
function reasonText(reason: string, limits: WebhookLimits | undefined): string {
  switch (reason) {
    case 'gone':
      return 'turned off by the service: the endpoint answered 410 Gone';
    case 'failing':
      return `turned off by the service: every delivery failed for ${limits ? formatDuration(limits.disable_after_seconds) : 'too long'}`;
    case 'backlog':
      return `turned off by the service: ${limits ? formatValue(limits.max_pending_deliveries) : 'too many'} deliveries waited for it`;
    case 'creator_left':
      return 'turned off by the service: the member it answered to left the project; enabling it makes you that member';
    default:
      return `turned off by the service (${reason})`;
  }
}

export default function Webhooks({ project }: ProjectPageProps) {
  const webhooks = useQuery(webhooksQuery(project.namespace));
  const items = webhooks.data?.items ?? [];
  return (
    <section>
      <PageTitle title={`${project.name}: webhooks`}>Webhooks</PageTitle>
      <p class="muted">
        The service sends what happens in this project (new events, insights, members, project changes) to these addresses, and retries
        until they answer 2xx.
      </p>
      <ErrorNote error={webhooks.error} />
      {webhooks.isLoading ? (
        <Loading what="Loading webhooks" />
      ) : items.length === 0 ? (
        <Empty>No webhook endpoints yet.</Empty>
      ) : (
        <ul class="rows" aria-label="Webhook endpoints">
          {items.map((webhook) => (
            <WebhookRow key={webhook.id} namespace={project.namespace} webhook={webhook} />
          ))}
        </ul>
      )}
      <CreateWebhook project={project} />
    </section>
  );
}

/** `a:b, c:d` or `a:b c:d` as a list. */
function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

function CreateWebhook({ project }: { project: Project }) {
  const namespace = project.namespace;
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [format, setFormat] = useState<Format>('standard');
  const [feeds, setFeeds] = useState<string[]>([]);
  const [tags, setTags] = useState('');
  const [notifyOnly, setNotifyOnly] = useState(false);
  const [created, setCreated] = useState<{ url: string; secret: string | undefined } | null>(null);
  const refresh = useInvalidateWebhooks(namespace);
  const formatId = useId();
  const notifyId = useId();
  const create = useAction({
    mutationFn: () =>
      sb.webhooks.create(namespace, {
        url,
        ...(description ? { description } : {}),
        format,
        filter: { feeds, tags: splitList(tags), notify_only: notifyOnly },
      }),
    onSuccess: async (webhook) => {
      // A replay (the SDK retried a creation whose answer was lost) holds neither: the url is the one sent.
      setCreated({ url: webhook.url ?? url, secret: webhook.secret });
      setUrl('');
      setDescription('');
      setFeeds([]);
      setTags('');
      setNotifyOnly(false);
      await refresh();
    },
  });
  return (
    <section class="panel" aria-labelledby="new-webhook">
      <h2 id="new-webhook">New endpoint</h2>
      <Form onSubmit={() => create.mutate()} label="New webhook endpoint">
        <Field
          label="URL"
          type="url"
          value={url}
          onValue={setUrl}
          required
          maxLength={2000}
          placeholder="https://hooks.example.com/signalboard"
          hint="An https address on the public internet."
        />
        <Field label="Description" value={description} onValue={setDescription} maxLength={500} />
        <div class="field">
          <label for={formatId}>Format</label>
          <select id={formatId} value={format} onChange={(e) => setFormat(e.currentTarget.value as Format)}>
            {FORMATS.map((f) => (
              <option key={f.value} value={f.value}>
                {f.label}
              </option>
            ))}
          </select>
        </div>
        <fieldset class="field checks">
          <legend>Only events from these feeds (none checked: every feed)</legend>
          {project.feeds.map((feed) => (
            <label key={feed.id} class="check">
              <input
                type="checkbox"
                checked={feeds.includes(feed.name)}
                onChange={(e) => {
                  const checked = e.currentTarget.checked;
                  setFeeds((list) => (checked ? [...list, feed.name] : list.filter((name) => name !== feed.name)));
                }}
              />{' '}
              <UserText text={feed.name} />
            </label>
          ))}
        </fieldset>
        <Field
          label="Only events with these tags"
          value={tags}
          onValue={setTags}
          placeholder="plan:pro, environment:production"
          hint="key:value, separated by commas or spaces; an event must carry all of them. Empty: no condition."
        />
        <div class="field inline-field">
          <input id={notifyId} type="checkbox" checked={notifyOnly} onChange={(e) => setNotifyOnly(e.currentTarget.checked)} />
          <label for={notifyId}>Only events published with notify</label>
        </div>
        <ErrorNote error={create.error} />
        <button type="submit" disabled={create.isPending}>
          Create endpoint
        </button>
      </Form>
      {created && (
        <ShownOnce label="The new signing secret" secret={created.secret}>
          Signing secret of{' '}
          <strong>
            <UserText text={created.url} />
          </strong>
          : copy it now, it is not shown again.
        </ShownOnce>
      )}
    </section>
  );
}

/**
 * A secret the service shows this once, with a copy button (as a new API token). Undefined when the
 * answer was a replay of a retried request: the service never shows a secret twice.
 */
function ShownOnce({ label, secret, children }: { label: string; secret: string | undefined; children: ComponentChildren }) {
  const [copied, setCopied] = useState<string | null>(null);
  if (secret === undefined) {
    return (
      <p class="notice" role="status">
        Done, but the answer that held the secret was lost, and a secret is shown only once: rotate it to get a new one.
      </p>
    );
  }
  return (
    <div class="new-token" role="status">
      <p>{children}</p>
      <div class="token-row">
        <code class="token" aria-label={label}>
          {secret}
        </code>
        <button
          type="button"
          onClick={() =>
            void navigator.clipboard.writeText(secret).then(
              () => setCopied('Copied.'),
              () => setCopied('Copying failed: select the secret and copy it.'),
            )
          }
        >
          Copy
        </button>
      </div>
      {copied && <span class="muted">{copied}</span>}
    </div>
  );
}

function describeFilter(filter: Webhook['filter']): string {
  const parts = [
    filter.types.length ? `types ${filter.types.join(', ')}` : 'all types',
    filter.feeds.length ? `feeds ${filter.feeds.join(', ')}` : 'all feeds',
    ...(filter.tags.length ? [`tags ${filter.tags.join(', ')}`] : []),
    ...(filter.notify_only ? ['notify only'] : []),
  ];
  return parts.join(' · ');
}

function WebhookRow({ namespace, webhook }: { namespace: string; webhook: Webhook }) {
  const [showLog, setShowLog] = useState(false);
  const [testResult, setTestResult] = useState<TestResult | null>(null);
  const [rotated, setRotated] = useState<Schemas['RotatedWebhookSecret'] | null>(null);
  const refresh = useInvalidateWebhooks(namespace);
  // Asked only for the reasons that quote a limit.
  const limits = useQuery({ ...serviceQuery, enabled: webhook.disabled_reason === 'failing' || webhook.disabled_reason === 'backlog' }).data
    ?.webhooks;
  const logId = useId();
  const toggle = useAction({
    mutationFn: () => sb.webhooks.update(namespace, webhook.id, { enabled: !webhook.enabled }),
    onSuccess: refresh,
  });
  const remove = useAction({ mutationFn: () => sb.webhooks.delete(namespace, webhook.id), onSuccess: refresh });
  const test = useAction({
    mutationFn: () => sb.webhooks.test(namespace, webhook.id),
    onMutate: () => setTestResult(null),
    onSuccess: setTestResult,
  });
  const rotate = useAction({ mutationFn: () => sb.webhooks.rotateSecret(namespace, webhook.id), onSuccess: setRotated });
  const state = webhook.enabled ? 'enabled' : webhook.disabled_reason ? reasonText(webhook.disabled_reason, limits) : 'disabled';
  return (
    <li class="row webhook">
      <span class="grow">
        <strong>
          <UserText text={webhook.url} />
        </strong>
        {webhook.description && (
          <span class="muted">
            {' '}
            · <UserText text={webhook.description} />
          </span>
        )}
        <br />
        <span class="muted small">
          <span class={webhook.enabled ? 'state ok' : 'state off'}>{state}</span> · {webhook.format} · {webhook.pending_deliveries}{' '}
          {webhook.pending_deliveries === 1 ? 'delivery' : 'deliveries'} waiting · {describeFilter(webhook.filter)} · made{' '}
          {formatTime(webhook.created_at)}
          {webhook.created_by && (
            <>
              {' '}
              · made by <UserText text={webhook.created_by.username} />
            </>
          )}
        </span>
      </span>
      <span class="buttons">
        <button
          type="button"
          class="secondary"
          aria-label={`${webhook.enabled ? 'Disable' : 'Enable'} ${webhook.url}`}
          disabled={toggle.isPending}
          onClick={() => toggle.mutate()}
        >
          {webhook.enabled ? 'Disable' : 'Enable'}
        </button>
        <button
          type="button"
          class="secondary"
          aria-label={`Send a test to ${webhook.url}`}
          disabled={test.isPending}
          onClick={() => test.mutate()}
        >
          {test.isPending ? 'Sending…' : 'Send a test'}
        </button>
        <button
          type="button"
          class="secondary"
          aria-label={`Rotate the secret of ${webhook.url}`}
          disabled={rotate.isPending}
          onClick={() => {
            if (confirm(`Make a new signing secret for ${webhook.url}? The old one keeps signing beside it for 24 hours.`)) rotate.mutate();
          }}
        >
          Rotate the secret
        </button>
        <button
          type="button"
          class="secondary"
          aria-label={`Deliveries of ${webhook.url}`}
          aria-expanded={showLog}
          aria-controls={logId}
          onClick={() => setShowLog((shown) => !shown)}
        >
          Deliveries
        </button>
        <button
          type="button"
          class="danger"
          aria-label={`Delete ${webhook.url}`}
          disabled={remove.isPending}
          onClick={() => {
            if (confirm(`Delete the endpoint ${webhook.url} and its deliveries? Nothing more is sent to it.`)) remove.mutate();
          }}
        >
          Delete
        </button>
      </span>
      <div class="webhook-extra">
        <ErrorNote error={toggle.error ?? remove.error ?? test.error ?? rotate.error} />
        {testResult && <TestOutcome result={testResult} />}
        {rotated && (
          <ShownOnce label="The new signing secret" secret={rotated.secret}>
            New signing secret of{' '}
            <strong>
              <UserText text={webhook.url} />
            </strong>
            : copy it now, it is not shown again. The old one signs beside it until {formatTime(rotated.previous_expires_at)}.
          </ShownOnce>
        )}
        <div id={logId} hidden={!showLog}>
          {showLog && <DeliveryLog namespace={namespace} webhook={webhook} />}
        </div>
      </div>
    </li>
  );
}

function TestOutcome({ result }: { result: TestResult }) {
  const ok = result.status_code !== null && result.status_code >= 200 && result.status_code < 300;
  return (
    <div class="test-result" role="status">
      <p class={ok ? 'notice' : 'error'}>
        Test: {result.status_code !== null ? `answered ${result.status_code}` : 'no answer'} in {result.duration_ms} ms
        {result.error ? `: ${result.error}` : ''}
      </p>
      {result.body && <AnswerBody body={result.body} />}
    </div>
  );
}

/** The first 1 KiB of what a receiver answered, as text. */
function AnswerBody({ body }: { body: string }) {
  return (
    <details>
      <summary>Answer body</summary>
      <pre class="answer-body">{body}</pre>
    </details>
  );
}

function DeliveryLog({ namespace, webhook }: { namespace: string; webhook: Webhook }) {
  const client = useQueryClient();
  const deliveries = useInfiniteQuery(deliveriesQuery(namespace, webhook.id));
  const retry = useAction({
    mutationFn: (id: string) => sb.webhooks.retryDelivery(namespace, webhook.id, id),
    onSuccess: () => invalidateDeliveries(client, namespace, webhook.id),
  });
  const items = deliveries.data?.pages.flatMap((page) => page.items) ?? [];
  return (
    <section class="delivery-log" aria-label={`Deliveries of ${webhook.url}`}>
      <h3>Deliveries</h3>
      <ErrorNote error={deliveries.error ?? retry.error} />
      {deliveries.isLoading ? (
        <Loading what="Loading deliveries" />
      ) : items.length === 0 ? (
        <Empty>No deliveries yet.</Empty>
      ) : (
        <ol class="rows">
          {items.map((delivery) => (
            <DeliveryRow
              key={delivery.id}
              delivery={delivery}
              retrying={retry.isPending && retry.variables === delivery.id}
              onRetry={() => retry.mutate(delivery.id)}
            />
          ))}
        </ol>
      )}
      {deliveries.hasNextPage && (
        <button type="button" class="load-more" disabled={deliveries.isFetchingNextPage} onClick={() => void deliveries.fetchNextPage()}>
          {deliveries.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  );
}

function DeliveryRow({ delivery, retrying, onRetry }: { delivery: Delivery; retrying: boolean; onRetry: () => void }) {
  return (
    <li class="row">
      <span class="grow">
        <code>{delivery.type}</code> <strong>{delivery.state}</strong>
        <span class="muted">
          {' '}
          · queued <time dateTime={delivery.created_at}>{ago(delivery.created_at)}</time>
          {delivery.next_attempt_at && (
            <>
              {' '}
              · next attempt <time dateTime={delivery.next_attempt_at}>{formatTime(delivery.next_attempt_at)}</time>
            </>
          )}{' '}
          · id {delivery.id}
        </span>
        {delivery.attempts.length > 0 && (
          <ol class="attempts" aria-label={`Attempts of delivery ${delivery.id}`}>
            {delivery.attempts.map((attempt, index) => (
              <li key={index}>
                <time dateTime={attempt.at}>{formatTime(attempt.at)}</time>:{' '}
                {attempt.status_code !== null ? `answered ${attempt.status_code}` : 'no answer'} in {attempt.duration_ms} ms
                {attempt.error ? ` (${attempt.error})` : ''}
                {attempt.body && <AnswerBody body={attempt.body} />}
              </li>
            ))}
          </ol>
        )}
      </span>
      <button type="button" class="secondary" aria-label={`Redeliver ${delivery.id}`} disabled={retrying} onClick={onRetry}>
        {retrying ? 'Sending…' : 'Redeliver'}
      </button>
    </li>
  );
}
