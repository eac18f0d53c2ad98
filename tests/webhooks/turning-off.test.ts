/**
 * When the service turns an endpoint off by itself: after failing without a success for
 * `WEBHOOK_DISABLE_AFTER` (3 days; 1 s here), with an activity entry and a mail to the owner; and
 * when 10,000 deliveries wait for it (the backlog's cap), queueing what fits and pausing it with an
 * activity entry, then queueing again what it missed once a member enables it.
 */
import { expect } from 'chai';
import { signUpOn, type TestUser } from '../support/accounts.js';
import { count, sql, type TestServer } from '../support/harness.js';
import { callAt, expectData } from '../support/http.js';
import { Mailbox } from '../support/mailbox.js';
import { createProject, projectPath } from '../support/projects.js';
import { Receiver, startWebhookServer } from '../support/receiver.js';

describe('webhooks: turned off by the service', function () {
  this.timeout(60_000);
  let server: TestServer;
  let box: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let namespace: string;
  const api = (method: string, path: string, body?: unknown) => callAt(server.url, method, projectPath(namespace, path), owner.token, body);
  const publish = (events: string[]) =>
    api('POST', '/events', { events: events.map((event) => ({ feed: 'general', event })) }).then((a) => expectData(a, 201));

  before(async () => {
    box = await Mailbox.start();
    receiver = await Receiver.start();
    server = await startWebhookServer({
      WEBHOOK_DISABLE_AFTER: '1s',
      WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms',
      SMTP_URL: box.url,
      SMTP_FROM: 'Signalboard <noreply@example.com>',
      PASSWORD_RESET_URL: 'https://app.example.com/reset?token=',
    });
    owner = await signUpOn(server);
    namespace = (await createProject(owner.token, {}, server.url)).namespace;
  });
  after(async () => {
    await server?.close();
    await receiver?.close();
    await box?.close();
  });

  it('turns off an endpoint that fails for WEBHOOK_DISABLE_AFTER without a success, records it and mails the owner', async () => {
    receiver.answer = () => ({ status: 500 });
    const endpoint = expectData(await api('POST', '/webhooks', { url: `${receiver.url}/failing` }), 201);
    await publish(['fails']);
    const off = await waitUntil(async () => {
      const shown = expectData(await api('GET', `/webhooks/${endpoint.id}`));
      return shown.enabled ? undefined : shown;
    });
    expect(off).to.include({ enabled: false, disabled_reason: 'failing' });
    const attempts = receiver.received.length;
    expect(attempts, 'it kept failing for about a second first').to.be.at.least(4);
    // Written by the statement that turned the endpoint off: there as soon as the endpoint shows off.
    const activity = expectData(await api('GET', '/activity')).items.filter((a: { type: string }) => a.type === 'webhook.disabled');
    expect(activity.map((a: { data: unknown }) => a.data)).to.deep.equal([{ webhook: endpoint.id, url: endpoint.url, reason: 'failing' }]);
    const [mail] = await box.waitFor(owner.email);
    expect(mail!.subject).to.equal(`Signalboard turned off a webhook endpoint of ${namespace}`);
    // The period as configured (WEBHOOK_DISABLE_AFTER=1s here), not the default's.
    expect(mail!.text).to.include(endpoint.url).and.include('every delivery to it failed for 1 second.');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.received.length, 'nothing is sent to an endpoint turned off').to.equal(attempts);
  });

  it('names a Slack or Discord endpoint it turns off masked, in the activity and in the mail: its path is the secret', async () => {
    receiver.answer = () => ({ status: 500 });
    const secrets = { discord: 'discord-token-never-shown', slack: 'slack-secret-never-shown' };
    const discord = expectData(
      await api('POST', '/webhooks', { url: `${receiver.url}/api/webhooks/1234/${secrets.discord}`, format: 'discord' }),
      201,
    );
    const slack = expectData(
      await api('POST', '/webhooks', { url: `${receiver.url}/services/T1/B2/${secrets.slack}`, format: 'slack' }),
      201,
    );
    const masked = { [discord.id]: `${receiver.url}/api/webhooks/1234/••••`, [slack.id]: `${receiver.url}/services/T1/B2/••••` };
    await publish(['fails where the secret is']);
    for (const endpoint of [discord, slack]) {
      await waitUntil(async () => (expectData(await api('GET', `/webhooks/${endpoint.id}`)).enabled ? undefined : true));
    }
    const answer = await api('GET', '/activity');
    expect(answer.text).not.to.include(secrets.discord).and.not.to.include(secrets.slack);
    const entries = expectData(answer).items.filter(
      (a: { type: string; data: { webhook: string } }) => a.type === 'webhook.disabled' && a.data.webhook in masked,
    );
    expect(entries.map((a: { data: unknown }) => a.data)).to.have.deep.members([
      { webhook: discord.id, url: masked[discord.id], reason: 'failing' },
      { webhook: slack.id, url: masked[slack.id], reason: 'failing' },
    ]);
    for (const endpoint of [discord, slack]) {
      const mail = await waitUntil(async () => (await box.waitFor(owner.email)).find((m) => m.text.includes(endpoint.id)));
      expect(mail.text).to.include(`The webhook endpoint ${masked[endpoint.id]} of the project`);
      expect(mail.text).not.to.include(secrets.discord).and.not.to.include(secrets.slack);
    }
  });

  it('queues what fits under 10,000 waiting, pauses the endpoint, and queues the rest again once it is enabled', async () => {
    receiver.answer = () => ({ status: 200 });
    const endpoint = expectData(await api('POST', '/webhooks', { url: `${receiver.url}/backlog`, enabled: false }), 201);
    // 9,998 deliveries already waiting (rows of a type nothing sends while the endpoint is off).
    await sql(
      `insert into webhook_deliveries (id, endpoint_id, type, payload, next_attempt_at, created_at)
       select gen_random_uuid(), ?, 'project.updated', '{}', now() + interval '1 hour', now() from generate_series(1, 9998)`,
      [endpoint.id],
      server.db,
    );
    await sql(`update webhook_endpoints set pending = 9998, enabled = true where id = ?`, [endpoint.id], server.db);
    await publish(['first', 'second', 'third', 'fourth']);
    const paused = expectData(await api('GET', `/webhooks/${endpoint.id}`));
    expect(paused).to.include({ enabled: false, disabled_reason: 'backlog', pending_deliveries: 10_000 });
    // The publish that paused it recorded why, once (the first endpoint of this suite has its own entry).
    const entries = expectData(await api('GET', '/activity')).items.filter(
      (a: { type: string; data: { webhook: string } }) => a.type === 'webhook.disabled' && a.data.webhook === endpoint.id,
    );
    expect(entries.map((a: { data: unknown }) => a.data)).to.deep.equal([{ webhook: endpoint.id, url: endpoint.url, reason: 'backlog' }]);
    expect(
      await count(`select count(*) from webhook_deliveries where endpoint_id = ? and state = 'pending'`, [endpoint.id], server.db),
    ).to.equal(10_000);
    await publish(['while paused']);
    expect(await count(`select count(*) from webhook_deliveries where endpoint_id = ?`, [endpoint.id], server.db)).to.equal(10_000);

    // The backlog drains (here: by deleting the waiting rows), and a member enables it again.
    await sql(`delete from webhook_deliveries where endpoint_id = ? and type = 'project.updated'`, [endpoint.id], server.db);
    await sql(`update webhook_endpoints set pending = 2 where id = ?`, [endpoint.id], server.db);
    const enabled = expectData(await api('PATCH', `/webhooks/${endpoint.id}`, { enabled: true }));
    expect(enabled).to.include({ enabled: true, disabled_reason: null, pending_deliveries: 5 });
    const backlogged = () => receiver.received.filter((r) => r.path === '/backlog');
    await waitUntil(async () => (backlogged().length >= 5 ? true : undefined));
    const sent = backlogged().map((r) => JSON.parse(r.body).data.event);
    expect(sent.sort()).to.deep.equal(['first', 'fourth', 'second', 'third', 'while paused']);
  });
});

/** Polls `probe` until it answers something, for at most 15 s. */
async function waitUntil<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('the condition did not hold within 15 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
