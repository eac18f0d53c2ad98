/**
 * Deliveries queued by a change other than an event (an insight's value, a member joining or
 * leaving, a project renamed, an increment) are sent as soon as the change commits: the write
 * declares that it queued them (db/commit-notices.ts) and the deliverer is woken then, not at its
 * next poll. The server polls once a minute here, so a delivery that waited for the poll would not
 * arrive within the test's second.
 */
import { expect } from 'chai';
import { signUpOn, type TestUser } from '../support/accounts.js';
import type { TestServer } from '../support/harness.js';
import { callAt, expectData } from '../support/http.js';
import { createProject, projectPath } from '../support/projects.js';
import { Receiver, startWebhookServer } from '../support/receiver.js';

const ROUNDS = 10;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
}

describe('webhooks: changes delivered as soon as they commit', function () {
  this.timeout(120_000);
  let server: TestServer;
  let receiver: Receiver;
  before(async () => {
    server = await startWebhookServer({ WEBHOOK_POLL_MS: '60000' });
    receiver = await Receiver.start();
  });
  after(async () => {
    await receiver?.close();
    await server?.close();
  });

  it('sends insight.updated, member.joined, member.left and project.updated at once, not at the next poll', async () => {
    const owner = await signUpOn(server);
    const as = (user: TestUser, method: string, path: string, body?: unknown) => callAt(server.url, method, path, user.token, body);
    const { namespace } = await createProject(owner.token, {}, server.url);
    const inProject = (user: TestUser, method: string, path: string, body?: unknown) =>
      as(user, method, projectPath(namespace, path), body);
    expectData(
      await inProject(owner, 'POST', '/webhooks', {
        url: `${receiver.url}/hook`,
        filter: { types: ['insight.updated', 'member.joined', 'member.left', 'project.updated'] },
      }),
      201,
    );
    const insight = expectData(await inProject(owner, 'POST', '/insights', { title: 'Revenue', value: 0 }), 201);

    const latencies = new Map<string, number[]>();
    /** Makes the change, then waits for the one delivery it queued: the time from the answer to its arrival. */
    const timed = async (type: string, change: () => Promise<void>) => {
      const before = receiver.received.length;
      await change();
      const answered = Date.now();
      await receiver.waitFor(before + 1, 1_000);
      const delivered = receiver.received[before]!;
      expect(JSON.parse(delivered.body).type).to.equal(type);
      latencies.set(type, [...(latencies.get(type) ?? []), delivered.at - answered]);
    };

    for (let round = 0; round < ROUNDS; round++) {
      await timed('insight.updated', async () => {
        expectData(await inProject(owner, 'PATCH', `/insights/${insight.id}`, { value: round + 1 }));
      });
      await timed('insight.updated', async () => {
        expectData(await inProject(owner, 'PATCH', `/insights/${insight.id}`, { increment: 1 }));
      });
      await timed('project.updated', async () => {
        expectData(await inProject(owner, 'PATCH', '', { name: `Renamed ${round}` }));
      });
      const mate = await signUpOn(server);
      expectData(await inProject(owner, 'POST', '/invites', { username: mate.username }), 201);
      await timed('member.joined', async () => {
        expectData(await inProject(mate, 'PUT', `/invites/${mate.username}`));
      });
      await timed('member.left', async () => {
        expect((await inProject(mate, 'DELETE', `/members/${mate.username}`)).status).to.equal(204);
      });
    }
    const all = [...latencies.values()].flat();
    console.log(
      `      ${all.length} changes, answer to delivery: p50 ${percentile(all, 0.5)} ms, p99 ${percentile(all, 0.99)} ms, ` +
        `max ${Math.max(...all)} ms (the deliverer polls every 60 s)`,
    );
    expect(all).to.have.length(ROUNDS * 5);
  });
});
