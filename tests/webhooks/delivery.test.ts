/**
 * Webhook endpoints delivering to real receivers (`node:http` on this machine, allowed by the
 * server's `WEBHOOK_ALLOW_HTTP` and `WEBHOOK_ALLOW_PRIVATE`): Standard Webhooks signatures checked
 * with the `standardwebhooks` package, the filters, the retry schedule (shortened), 410, the
 * delivery log and a retry now, a secret's rotation, Slack's and Discord's shapes, the other change
 * types, recovery, and the caps and refusals of managing endpoints.
 */
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { signUpOn, type TestUser } from '../support/accounts.js';
import { sql, type TestServer } from '../support/harness.js';
import { callAt, expectData, expectError, expectInvalid, expectNoContent } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { Receiver, startWebhookServer } from '../support/receiver.js';

describe('webhooks: delivery to real receivers', function () {
  this.timeout(60_000);
  let server: TestServer;
  let receiver: Receiver;
  let owner: TestUser;
  let namespace: string;
  const api = (method: string, path: string, body?: unknown) => callAt(server.url, method, projectPath(namespace, path), owner.token, body);
  const publish = (body: Record<string, unknown>, feed = 'general') =>
    api('POST', `/feeds/${feed}/events`, body).then((a) => expectData(a, 201));
  const createEndpoint = async (body: Record<string, unknown>) =>
    expectData(await api('POST', '/webhooks', { url: receiver.url + '/hook', ...body }), 201);
  const deliveries = async (id: string) => expectData(await api('GET', `/webhooks/${id}/deliveries`)).items;

  before(async () => {
    server = await startWebhookServer();
    owner = await signUpOn(server);
    namespace = (await createProject(owner.token, {}, server.url)).namespace;
    expectData(await api('POST', '/feeds', { name: 'payments' }), 201);
  });
  after(async () => {
    await server?.close();
  });
  beforeEach(async () => {
    receiver = await Receiver.start();
  });
  afterEach(async () => {
    // One endpoint at a time: each test's endpoints go with it.
    for (const endpoint of expectData(await api('GET', '/webhooks')).items)
      expectNoContent(await api('DELETE', `/webhooks/${endpoint.id}`));
    await receiver.close();
  });

  it('signs every event.created with the secret shown once, as Standard Webhooks, with the event as the API shows it', async () => {
    const endpoint = await createEndpoint({ description: 'all events' });
    expect(endpoint.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(endpoint).to.include({ format: 'standard', enabled: true, disabled_reason: null, pending_deliveries: 0 });
    expect(endpoint.filter).to.deep.equal({ types: [], feeds: [], tags: [], notify_only: false });
    expect(expectData(await api('GET', `/webhooks/${endpoint.id}`))).to.not.have.property('secret');

    const event = await publish({ event: 'New sign-up', emoji: '🎉', tags: { plan: 'pro' }, user_id: 'u-1' });
    await receiver.waitFor(1);
    const [request] = receiver.received;
    const verified = new Webhook(endpoint.secret).verify(request!.body, request!.headers as Record<string, string>);
    expect(verified).to.deep.include({ type: 'event.created', data: event });
    expect((verified as { timestamp: string }).timestamp).to.equal(event.created_at);

    const [delivery] = await waitUntil(async () => {
      const items = await deliveries(endpoint.id);
      return items[0]?.state === 'delivered' ? items : undefined;
    });
    expect(request!.headers['webhook-id']).to.equal(delivery.id);
    expect(delivery).to.include({ type: 'event.created', state: 'delivered', next_attempt_at: null });
    expect(delivery.attempts).to.have.length(1);
    expect(delivery.attempts[0]).to.include({ status_code: 200, body: 'ok', error: null });
    expect(expectData(await api('GET', `/webhooks/${endpoint.id}`)).pending_deliveries).to.equal(0);
  });

  it('sends only what passes the filter: feeds, every tag, notify_only', async () => {
    const endpoint = await createEndpoint({ filter: { feeds: ['payments'], tags: ['plan:pro', 'seats:5'], notify_only: true } });
    await publish({ event: 'wrong feed', notify: true, tags: { plan: 'pro', seats: 5 } });
    await publish({ event: 'not notified', tags: { plan: 'pro', seats: 5 } }, 'payments');
    await publish({ event: 'one tag short', notify: true, tags: { plan: 'pro' } }, 'payments');
    await publish({ event: 'other value', notify: true, tags: { plan: 'team', seats: 5 } }, 'payments');
    await publish({ event: 'passes', notify: true, tags: { plan: 'pro', seats: 5 } }, 'payments');
    await receiver.waitFor(1);
    await sleep(300);
    expect(receiver.received.map((r) => JSON.parse(r.body).data.event)).to.deep.equal(['passes']);
    expect(await deliveries(endpoint.id)).to.have.length(1);
  });

  it('retries a failing delivery on the schedule, then marks it failed; the log keeps each attempt', async () => {
    receiver.answer = () => ({ status: 503, body: 'down for maintenance' });
    const endpoint = await createEndpoint({});
    await publish({ event: 'will fail' });
    await receiver.waitFor(3);
    const times = receiver.received.map((r) => r.at);
    // The schedule is 300 ms then 600 ms (each with up to 10 % more).
    expect(times[1]! - times[0]!).to.be.within(280, 1_000);
    expect(times[2]! - times[1]!).to.be.within(580, 1_500);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, 'one webhook-id on every attempt').to.equal(1);
    const [delivery] = await waitUntil(async () => {
      const items = await deliveries(endpoint.id);
      return items[0]?.state === 'failed' ? items : undefined;
    });
    expect(delivery.next_attempt_at).to.equal(null);
    expect(delivery.attempts.map((a: { status_code: number }) => a.status_code)).to.deep.equal([503, 503, 503]);
    expect(delivery.attempts[0].body).to.equal('down for maintenance');
    await sleep(700);
    expect(receiver.received, 'no attempt after the last retry').to.have.length(3);
    expect(expectData(await api('GET', `/webhooks/${endpoint.id}`))).to.include({ pending_deliveries: 0, enabled: true });

    // A retry now sends it again with its id, and a success makes it delivered.
    receiver.answer = () => ({ status: 204 });
    const retried = expectData(await api('POST', `/webhooks/${endpoint.id}/deliveries/${delivery.id}/retry`));
    expect(retried).to.include({ id: delivery.id, state: 'delivered' });
    expect(retried.attempts.map((a: { status_code: number }) => a.status_code)).to.deep.equal([204, 503, 503, 503]);
    expect(receiver.received.at(-1)!.headers['webhook-id']).to.equal(delivery.id);
  });

  it('turns an endpoint off at once on 410 Gone, with an activity entry, and queues nothing more for it', async () => {
    receiver.answer = () => ({ status: 410 });
    const endpoint = await createEndpoint({});
    await publish({ event: 'gone' });
    await receiver.waitFor(1);
    const after = await waitUntil(async () => {
      const shown = expectData(await api('GET', `/webhooks/${endpoint.id}`));
      return shown.enabled ? undefined : shown;
    });
    expect(after).to.include({ enabled: false, disabled_reason: 'gone', pending_deliveries: 0 });
    // Written by the statement that turned the endpoint off: there as soon as the endpoint shows off, never after.
    const activity = expectData(await api('GET', '/activity')).items.find((a: { type: string }) => a.type === 'webhook.disabled');
    expect(activity?.data).to.deep.equal({ webhook: endpoint.id, url: endpoint.url, reason: 'gone' });
    expect(activity.actor).to.equal(null);
    await publish({ event: 'after it went' });
    await sleep(300);
    expect(receiver.received).to.have.length(1);
    expect(await deliveries(endpoint.id)).to.have.length(1);

    // Enabling it again queues what it missed since it was turned off.
    receiver.answer = () => ({ status: 200 });
    expect(expectData(await api('PATCH', `/webhooks/${endpoint.id}`, { enabled: true }))).to.include({
      enabled: true,
      disabled_reason: null,
    });
    await receiver.waitFor(2);
    expect(JSON.parse(receiver.received[1]!.body).data.event).to.equal('after it went');
  });

  it('signs with both secrets for a day after a rotation', async () => {
    const endpoint = await createEndpoint({});
    const rotated = expectData(await api('POST', `/webhooks/${endpoint.id}/secret`));
    expect(rotated.secret)
      .to.match(/^whsec_/)
      .and.not.equal(endpoint.secret);
    expect(new Date(rotated.previous_expires_at).getTime() - Date.now()).to.be.within(86_340_000, 86_400_000);
    await publish({ event: 'after rotation' });
    await receiver.waitFor(1);
    const request = receiver.received[0]!;
    expect(String(request.headers['webhook-signature']).split(' ')).to.have.length(2);
    for (const secret of [endpoint.secret, rotated.secret]) {
      expect(new Webhook(secret).verify(request.body, request.headers as Record<string, string>)).to.have.property('type', 'event.created');
    }
    // Once the old secret has expired, only the new one signs.
    await sql(
      `update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ?`,
      [endpoint.id],
      server.db,
    );
    await publish({ event: 'after expiry' });
    await receiver.waitFor(2);
    const later = receiver.received[1]!;
    expect(String(later.headers['webhook-signature']).split(' ')).to.have.length(1);
    expect(() => new Webhook(endpoint.secret).verify(later.body, later.headers as Record<string, string>)).to.throw();
  });

  it('shapes Slack and Discord messages as plain text, unsigned: no markup, link or mention a publisher wrote takes effect', async () => {
    await createEndpoint({ format: 'slack' });
    await createEndpoint({ format: 'discord' });
    await publish(
      {
        event: '@everyone <!channel> [phish](https://evil.example) <https://evil.example|click> *b* _i_ ~s~ `c` & co',
        emoji: '💸',
        description: 'Card ending 4242\n# Header\n- item > quote ||spoiler||\n1. first <@123> \\o/',
      },
      'payments',
    );
    await receiver.waitFor(2);
    const bodies = receiver.received.map((r) => JSON.parse(r.body));
    expect(bodies).to.deep.include({
      text:
        '💸 @everyone &lt;!channel&gt; [phish](https://evil.example) &lt;https://evil.example|click&gt; *b* _i_ ~s~ `c` &amp; co ' +
        'in #payments: Card ending 4242\n# Header\n- item &gt; quote ||spoiler||\n1. first &lt;@123&gt; \\o/',
      mrkdwn: false,
    });
    expect(bodies).to.deep.include({
      content:
        '💸 **@everyone \\<!channel\\> \\[phish\\]\\(https://evil.example\\) \\<https://evil.example\\|click\\> ' +
        '\\*b\\* \\_i\\_ \\~s\\~ \\`c\\` & co** in #payments: Card ending 4242\n\\# Header\n\\- item \\> quote ' +
        '\\|\\|spoiler\\|\\|\n1\\. first \\<@123\\> \\\\o/',
      allowed_mentions: { parse: [] },
    });
    for (const request of receiver.received) expect(request.headers).to.not.have.property('webhook-signature');
  });

  it('shows a Slack or Discord address whole once, at creation, then masked; stores it whole and never takes the masked form for it', async () => {
    const activityUrls = async () =>
      expectData(await api('GET', '/activity?limit=100')).items.flatMap((a: { data: { url?: string } }) =>
        a.data.url ? [a.data.url] : [],
      );
    const cases = [
      { format: 'slack', path: '/services/T0001/B0001/s3cr3tPart', shown: '/services/T0001/B0001/••••' },
      { format: 'discord', path: '/api/webhooks/1234/t0k-en_s3cr3t/', shown: '/api/webhooks/1234/••••' },
    ];
    for (const { format, path, shown } of cases) {
      const whole = receiver.url + path;
      const masked = receiver.url + shown;
      const created = expectData(await api('POST', '/webhooks', { url: whole, format }), 201);
      expect(created.url).to.equal(whole);
      expect(expectData(await api('GET', `/webhooks/${created.id}`)).url).to.equal(masked);
      expect(expectData(await api('GET', '/webhooks')).items.find((w: { id: string }) => w.id === created.id).url).to.equal(masked);
      expect(expectData(await api('PATCH', `/webhooks/${created.id}`, { description: 'ops' }))).to.include({
        url: masked,
        description: 'ops',
      });

      const sentBack = await api('PATCH', `/webhooks/${created.id}`, { url: masked });
      expect(sentBack.status).to.equal(400);
      expect(sentBack.json).to.deep.equal({
        success: false,
        error: {
          code: 'invalid_request',
          message: 'url is masked as the service shows it: send the whole address, or leave url out to keep the stored one',
          details: [
            {
              path: '/body/url',
              message: 'is masked as the service shows it: send the whole address, or leave url out to keep the stored one',
            },
          ],
        },
      });
      const toStandard = await api('PATCH', `/webhooks/${created.id}`, { format: 'standard' });
      expect(toStandard.status).to.equal(400);
      expect(toStandard.json.error.details).to.deep.equal([
        {
          path: '/body/format',
          message: 'can become standard only with a url: a Slack or Discord address is shown masked, a standard one whole',
        },
      ]);
      const [row] = await sql('select url, format, description from webhook_endpoints where id = ?', [created.id], server.db);
      expect(row).to.deep.equal({ url: whole, format, description: 'ops' });

      // Deliveries go to the whole address; the test message names the masked one.
      expectData(await api('POST', `/webhooks/${created.id}/test`));
      const request = receiver.received.at(-1)!;
      expect(request.path).to.equal(path);
      const text = `✅ Signalboard test delivery to ${masked}`;
      const escaped = `✅ Signalboard test delivery to ${masked.replace(/[-\\*_~`|<>[\]()#]/g, '\\$&')}`;
      expect(JSON.parse(request.body)).to.deep.equal(
        format === 'slack' ? { text, mrkdwn: false } : { content: escaped, allowed_mentions: { parse: [] } },
      );
      expectNoContent(await api('DELETE', `/webhooks/${created.id}`));
      const urls = await activityUrls();
      expect(urls).to.include(masked);
      expect(urls.join(' ')).to.not.include(path.split('/').filter(Boolean).at(-1));
    }
    // A standard endpoint's address is no secret (its signing secret is): shown whole.
    const standard = await createEndpoint({});
    expect(expectData(await api('GET', `/webhooks/${standard.id}`)).url).to.equal(receiver.url + '/hook');
  });

  it('sends insight, member and project changes to endpoints whose types let them through', async () => {
    await createEndpoint({ filter: { types: ['insight.updated', 'project.updated', 'member.joined', 'member.left'] } });
    const insight = expectData(await api('POST', '/insights', { title: 'MRR', value: 10 }), 201);
    expectData(await api('PATCH', `/insights/${insight.id}`, { value: 12 }));
    // An increment alone goes with its insight's group of increments, one statement: it queues too.
    const incremented = expectData(await api('PATCH', `/insights/${insight.id}`, { increment: 3 }));
    await publish({ event: 'not subscribed' });
    const member = await signUpOn(server);
    expectData(await api('POST', '/invites', { username: member.username }), 201);
    expectData(await callAt(server.url, 'PUT', projectPath(namespace, `/invites/${member.username}`), member.token));
    expectNoContent(await api('DELETE', `/members/${member.username}`));
    expectData(await callAt(server.url, 'PATCH', projectPath(namespace), owner.token, { name: 'Renamed' }));
    await receiver.waitFor(5);
    await sleep(200);
    const sent = receiver.received.map((r) => JSON.parse(r.body));
    expect(sent.map((m) => m.type)).to.have.members([
      'insight.updated',
      'insight.updated',
      'member.joined',
      'member.left',
      'project.updated',
    ]);
    const insights = sent.filter((m) => m.type === 'insight.updated').map((m) => m.data);
    expect(insights.map((i) => i.value)).to.have.members([12, 15]);
    expect(
      insights.find((i) => i.value === 15),
      "the increment's delivery shows the insight as the API does",
    ).to.deep.equal(incremented);
    expect(sent.find((m) => m.type === 'member.joined').data).to.deep.equal({
      id: member.id,
      username: member.username,
      icon: null,
      role: 'member',
    });
    expect(sent.find((m) => m.type === 'project.updated').data).to.include({ name: 'Renamed', namespace });
  });

  it('recovers the stored events since an instant, as new deliveries', async () => {
    const before = new Date();
    await publish({ event: 'missed 1' });
    await publish({ event: 'missed 2' });
    const endpoint = await createEndpoint({});
    const recovered = expectData(await api('POST', `/webhooks/${endpoint.id}/recover`, { since: before.toISOString() }));
    expect(recovered).to.deep.equal({ queued: 2, resume_since: null });
    await receiver.waitFor(2);
    expect(receiver.received.map((r) => JSON.parse(r.body).data.event)).to.deep.equal(['missed 1', 'missed 2']);
  });

  it('tests an endpoint and answers what came back, keeping nothing', async () => {
    receiver.answer = () => ({ status: 202, body: 'x'.repeat(5_000) });
    const endpoint = await createEndpoint({});
    const result = expectData(await api('POST', `/webhooks/${endpoint.id}/test`));
    expect(result.status_code).to.equal(202);
    expect(result.body).to.equal('x'.repeat(1024));
    expect(result.error).to.equal(null);
    const verified = new Webhook(endpoint.secret).verify(
      receiver.received[0]!.body,
      receiver.received[0]!.headers as Record<string, string>,
    );
    expect(verified).to.have.property('type', 'webhook.test');
    expect(await deliveries(endpoint.id)).to.deep.equal([]);
  });

  it('refuses bad endpoints with a 400 that creates nothing, and more than the cap with 409', async () => {
    for (const url of ['ftp://example.com/hook', 'not a url', 'https://user:pw@example.com/hook']) {
      expectInvalid(await api('POST', '/webhooks', { url }), '/body/url', url);
    }
    expectInvalid(await api('POST', '/webhooks', { url: receiver.url, filter: { types: ['webhook.test'] } }), '/body/filter/types/0');
    expectInvalid(await api('POST', '/webhooks', { url: receiver.url, filter: { tags: ['no-colon'] } }), '/body/filter/tags/0');
    expect(expectData(await api('GET', '/webhooks')).items).to.deep.equal([]);
    for (let i = 0; i < 10; i++) await createEndpoint({ description: `endpoint ${i}` });
    const refused = await api('POST', '/webhooks', { url: receiver.url });
    expect(refused.status).to.equal(409);
    expect(refused.json.error).to.deep.include({
      code: 'limit_reached',
      details: [{ path: '/limits/MAX_WEBHOOKS_PER_PROJECT', message: 'at most 10' }],
    });
    expect(expectData(await api('GET', '/webhooks')).items).to.have.length(10);
  });

  it('is 404 to a non-member for every operation, and to another project for its endpoint', async () => {
    const endpoint = await createEndpoint({});
    const stranger = await signUpOn(server);
    for (const [method, path] of [
      ['GET', '/webhooks'],
      ['GET', `/webhooks/${endpoint.id}`],
      ['PATCH', `/webhooks/${endpoint.id}`],
      ['DELETE', `/webhooks/${endpoint.id}`],
      ['POST', `/webhooks/${endpoint.id}/test`],
    ] as const) {
      expectError(
        await callAt(server.url, method, projectPath(namespace, path), stranger.token, method === 'PATCH' ? {} : undefined),
        404,
        'not_found',
      );
    }
    const other = (await createProject(stranger.token, {}, server.url)).namespace;
    expectError(await callAt(server.url, 'GET', projectPath(other, `/webhooks/${endpoint.id}`), stranger.token), 404, 'not_found');
    expect(receiver.received).to.have.length(0);
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it answers something, for at most 10 s. */
async function waitUntil<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('the condition did not hold within 10 s');
    await sleep(50);
  }
}

describe('webhooks: stopping the service', function () {
  this.timeout(60_000);

  it('does not wait out an endpoint that hangs: the service closes within the deliverer’s 5 s, not two 15 s attempt timeouts', async () => {
    const server = await startWebhookServer({ WEBHOOK_TIMEOUT_MS: '15000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' });
    const receiver = await Receiver.start();
    receiver.answer = () => 'hang';
    try {
      const owner = await signUpOn(server);
      const { namespace } = await createProject(owner.token, {}, server.url);
      const api = (method: string, path: string, body?: unknown) =>
        callAt(server.url, method, projectPath(namespace, path), owner.token, body);
      expectData(await api('POST', '/webhooks', { url: `${receiver.url}/hang` }), 201);
      expectData(await api('POST', '/feeds/general/events', { event: 'never answered' }), 201);
      await receiver.waitFor(1);
      const started = Date.now();
      await server.close();
      // Two attempt timeouts would be 30 s; the deliverer leaves the batch after 5 s.
      expect(Date.now() - started).to.be.below(10_000);
    } finally {
      await receiver.close();
    }
  });
});
