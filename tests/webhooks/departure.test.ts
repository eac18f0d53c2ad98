/**
 * What a member's departure ends (docs/security.md, "What a member's departure ends"): the webhook
 * endpoints it made or pointed somewhere stop delivering to its receivers, whether it leaves, is
 * removed or deletes its account (turned off with `disabled_reason` `creator_left`, an activity
 * entry, and deliveries already queued for them held back); the owner may turn one on again and
 * then answers for it. Beside them: an API token limited to the project, an open event stream,
 * the pending invites it sent, and the answers recorded for its `Idempotency-Key`s all end with
 * the membership; a hand-over ends nothing.
 */
import { expect } from 'chai';
import { signUpOn, type TestUser } from '../support/accounts.js';
import { sql, type TestServer } from '../support/harness.js';
import { callAt, expectData, expectError, expectNoContent } from '../support/http.js';
import { createProject, member, projectPath } from '../support/projects.js';
import { Receiver, startWebhookServer } from '../support/receiver.js';
import { RawStream } from '../support/sse.js';

/** A project with its owner, a member, and a receiver each, behind an endpoint each made. */
interface Team {
  namespace: string;
  owner: TestUser;
  mate: TestUser;
  ownerReceiver: Receiver;
  mateReceiver: Receiver;
  ownerEndpoint: { id: string; url: string };
  mateEndpoint: { id: string; url: string; created_by: unknown };
}

/** How a member goes: removed by the owner, leaving, or deleting its account. */
type Departure = (server: TestServer, team: Team) => Promise<void>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('webhooks: what a member made ends with its membership', function () {
  this.timeout(60_000);
  let server: TestServer;
  const receivers: Receiver[] = [];
  const as = (user: TestUser, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    callAt(server.url, method, path, user.token, body, headers);
  const inProject = (team: Team, user: TestUser, method: string, path: string, body?: unknown) =>
    as(user, method, projectPath(team.namespace, path), body);
  const publish = (team: Team, event: string) =>
    inProject(team, team.owner, 'POST', '/feeds/general/events', { event }).then((a) => expectData(a, 201));
  const receiver = async () => {
    const started = await Receiver.start();
    receivers.push(started);
    return started;
  };
  const activity = async (team: Team, type: string) =>
    expectData(await inProject(team, team.owner, 'GET', '/activity')).items.filter((a: { type: string }) => a.type === type);
  const endpointRow = async (id: string) =>
    (
      await sql<{ enabled: boolean; disabled_reason: string | null; created_by: string | null }>(
        'select enabled, disabled_reason, created_by from webhook_endpoints where id = ?',
        [id],
        server.db,
      )
    )[0]!;

  async function team(): Promise<Team> {
    const owner = await signUpOn(server);
    const mate = await signUpOn(server);
    const { namespace } = await createProject(owner.token, {}, server.url);
    expectData(await as(owner, 'POST', projectPath(namespace, '/invites'), { username: mate.username }), 201);
    expectData(await as(mate, 'PUT', projectPath(namespace, `/invites/${mate.username}`)));
    const [ownerReceiver, mateReceiver] = [await receiver(), await receiver()];
    // Events only: the departure's own `member.left` goes to neither.
    const create = async (user: TestUser, to: Receiver) =>
      expectData(
        await as(user, 'POST', projectPath(namespace, '/webhooks'), { url: `${to.url}/hook`, filter: { types: ['event.created'] } }),
        201,
      );
    return {
      namespace,
      owner,
      mate,
      ownerReceiver,
      mateReceiver,
      ownerEndpoint: await create(owner, ownerReceiver),
      mateEndpoint: await create(mate, mateReceiver),
    };
  }

  before(async () => {
    // A delivery that failed before a departure waits for its retry until the test makes it due.
    server = await startWebhookServer({ WEBHOOK_RETRY_SCHEDULE: '1h,1h' });
  });
  after(async () => {
    await server?.close();
    for (const r of receivers) await r.close();
  });

  /**
   * The review's scenario: the member's endpoint has a delivery waiting for a retry when it goes;
   * afterwards neither that delivery nor the next event reaches its receiver, while the owner's
   * receiver gets the next event (proof that the deliverer ran meanwhile).
   */
  async function departs(depart: Departure): Promise<Team> {
    const t = await team();
    t.mateReceiver.answer = () => ({ status: 503 });
    await publish(t, 'before');
    await t.mateReceiver.waitFor(1);
    await t.ownerReceiver.waitFor(1);
    t.mateReceiver.answer = () => ({ status: 200 });
    // Its failure written: the delivery waits for its retry.
    for (let attempts = 0; attempts < 1; await sleep(20)) {
      const [delivery] = expectData(await inProject(t, t.mate, 'GET', `/webhooks/${t.mateEndpoint.id}/deliveries`)).items;
      attempts = delivery?.attempts.length ?? 0;
    }

    await depart(server, t);
    await sql(
      `update webhook_deliveries set next_attempt_at = now() where endpoint_id = ? and state = 'pending'`,
      [t.mateEndpoint.id],
      server.db,
    );
    const after = await publish(t, 'after');
    await t.ownerReceiver.waitFor(2);
    expect(JSON.parse(t.ownerReceiver.received[1]!.body).data.id).to.equal(after.id);
    // Some more of the deliverer's cycles (one every 50 ms at most) with the waiting delivery due.
    await sleep(500);
    expect(t.mateReceiver.received, "nothing more reaches the departed member's receiver").to.have.length(1);

    const shown = expectData(await inProject(t, t.owner, 'GET', `/webhooks/${t.mateEndpoint.id}`));
    expect(shown).to.include({ enabled: false, disabled_reason: 'creator_left', pending_deliveries: 1 });
    expect(expectData(await inProject(t, t.owner, 'GET', `/webhooks/${t.ownerEndpoint.id}`))).to.include({ enabled: true });
    const entries = await activity(t, 'webhook.disabled');
    expect(entries.map((a: { data: unknown }) => a.data)).to.deep.equal([
      { webhook: t.mateEndpoint.id, url: t.mateEndpoint.url, reason: 'creator_left' },
    ]);
    expect(entries[0].actor).to.equal(null);
    expect(await endpointRow(t.mateEndpoint.id)).to.include({ enabled: false, disabled_reason: 'creator_left' });
    expect(t.mateEndpoint.created_by, 'its maker, as made').to.deep.equal(member(t.mate));
    return t;
  }

  const removed: Departure = async (_, t) => expectNoContent(await inProject(t, t.owner, 'DELETE', `/members/${t.mate.username}`));
  const leaves: Departure = async (_, t) => expectNoContent(await inProject(t, t.mate, 'DELETE', `/members/${t.mate.username}`));
  const deletesAccount: Departure = async (_, t) =>
    expectNoContent(await as(t.mate, 'DELETE', '/v1/users/me', { password: t.mate.password }));

  it('removed by the owner: its endpoint is turned off (creator_left) with an entry, and nothing more reaches its receiver', async () => {
    const t = await departs(removed);
    expect(expectData(await inProject(t, t.owner, 'GET', `/webhooks/${t.mateEndpoint.id}`)).created_by).to.deep.equal(member(t.mate));
    expect((await endpointRow(t.mateEndpoint.id)).created_by).to.equal(t.mate.id);
  });

  it('leaving: the same', async () => {
    await departs(leaves);
  });

  it('deleting its account: the same; the endpoint then shows no maker', async () => {
    const t = await departs(deletesAccount);
    expect(expectData(await inProject(t, t.owner, 'GET', `/webhooks/${t.mateEndpoint.id}`)).created_by).to.equal(null);
    expect((await endpointRow(t.mateEndpoint.id)).created_by).to.equal(null);
  });

  it('the owner may turn it on again, and then answers for it: its maker from then on', async () => {
    const t = await departs(removed);
    const enabled = expectData(await inProject(t, t.owner, 'PATCH', `/webhooks/${t.mateEndpoint.id}`, { enabled: true }));
    expect(enabled).to.include({ enabled: true, disabled_reason: null });
    expect(enabled.created_by).to.deep.equal(member(t.owner));
    expect(await endpointRow(t.mateEndpoint.id)).to.include({ enabled: true, disabled_reason: null, created_by: t.owner.id });
    // What waited, and what it missed while off, now goes: the owner chose to send it there.
    await t.mateReceiver.waitFor(3);
    expect(t.mateReceiver.received.map((r) => JSON.parse(r.body).data.event).sort()).to.deep.equal(['after', 'before', 'before']);
  });

  it("a member who points the owner's endpoint at its own receiver answers for it, and it is turned off when the member goes", async () => {
    const t = await team();
    const moved = expectData(
      await inProject(t, t.mate, 'PATCH', `/webhooks/${t.ownerEndpoint.id}`, { url: `${t.mateReceiver.url}/moved` }),
    );
    await leaves(server, t);
    const shown = expectData(await inProject(t, t.owner, 'GET', `/webhooks/${t.ownerEndpoint.id}`));
    expect(shown).to.include({ enabled: false, disabled_reason: 'creator_left' });
    expect(moved.created_by).to.deep.equal(member(t.mate));
  });

  it('a hand-over turns nothing off: the old owner stays a member', async () => {
    const t = await team();
    expectData(await inProject(t, t.owner, 'PUT', '/owner', { username: t.mate.username }));
    for (const endpoint of [t.ownerEndpoint, t.mateEndpoint])
      expect(expectData(await inProject(t, t.mate, 'GET', `/webhooks/${endpoint.id}`))).to.include({
        enabled: true,
        disabled_reason: null,
      });
    expect(await activity(t, 'webhook.disabled')).to.deep.equal([]);
  });

  it("only the departing member's endpoints in that project: its endpoints elsewhere, and other members', keep delivering", async () => {
    const t = await team();
    const { namespace: own } = await createProject(t.mate.token, {}, server.url);
    const elsewhere = expectData(await as(t.mate, 'POST', projectPath(own, '/webhooks'), { url: `${t.mateReceiver.url}/own` }), 201);
    await removed(server, t);
    expect(expectData(await as(t.mate, 'GET', projectPath(own, `/webhooks/${elsewhere.id}`)))).to.include({ enabled: true });
    expect(expectData(await inProject(t, t.owner, 'GET', `/webhooks/${t.ownerEndpoint.id}`))).to.include({ enabled: true });
  });

  describe('what else a member leaves behind', () => {
    it('an API token limited to the project answers 404 once its user is no member', async () => {
      const t = await team();
      const token = expectData(await as(t.mate, 'POST', '/v1/auth/tokens', { name: 'ci', projects: [t.namespace] }), 201).token as string;
      const withToken = (method: string, path: string, body?: unknown) =>
        callAt(server.url, method, projectPath(t.namespace, path), token, body);
      expectData(await withToken('GET', '/webhooks'));
      await removed(server, t);
      expectError(await withToken('GET', ''), 404, 'not_found');
      expectError(await withToken('GET', '/webhooks'), 404, 'not_found');
      expectError(await withToken('POST', '/feeds/general/events', { event: 'after' }), 404, 'not_found');
    });

    it('an open event stream ends when the member leaves', async () => {
      const t = await team();
      const stream = await RawStream.open(`${server.url}${projectPath(t.namespace, '/events/stream')}`, { token: t.mate.token });
      try {
        await stream.until(() => stream.retry !== undefined, 5_000);
        await leaves(server, t);
        const how = await Promise.race([stream.ended, sleep(2_000).then(() => 'still open')]);
        expect(how).to.equal('end');
      } finally {
        stream.close();
      }
    });

    it('the pending invites it sent (as the owner it was before a hand-over) are revoked when it goes', async () => {
      const t = await team();
      const invitee = await signUpOn(server);
      expectData(await inProject(t, t.owner, 'POST', '/invites', { username: invitee.username }), 201);
      expectData(await inProject(t, t.owner, 'PUT', '/owner', { username: t.mate.username }));
      // The new owner removes the old one.
      expectNoContent(await inProject(t, t.mate, 'DELETE', `/members/${t.owner.username}`));
      expect(expectData(await inProject(t, t.mate, 'GET', '/invites')).items).to.deep.equal([]);
      expectError(await inProject(t, invitee, 'PUT', `/invites/${invitee.username}`), 404, 'not_found');
      const revoked = expectData(await inProject(t, t.mate, 'GET', '/activity')).items.filter(
        (a: { type: string }) => a.type === 'invite.revoked',
      );
      expect(revoked.map((a: { data: unknown; actor: unknown }) => [a.data, a.actor])).to.deep.equal([
        [{ username: invitee.username }, null],
      ]);
    });

    it('an Idempotency-Key answer recorded in the project is not replayed to it afterwards (404, as any request of a non-member)', async () => {
      const t = await team();
      const body = { url: `${t.mateReceiver.url}/keyed` };
      const keyed = () => as(t.mate, 'POST', projectPath(t.namespace, '/webhooks'), body, { 'Idempotency-Key': 'departure-1' });
      expectData(await keyed(), 201);
      expect((await keyed()).headers.get('idempotent-replayed')).to.equal('true');
      await removed(server, t);
      expectError(await keyed(), 404, 'not_found');
    });
  });
});
