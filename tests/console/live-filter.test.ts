/**
 * The live feed filters events in the page as they arrive (console/src/pages/project/filters.ts);
 * a reload lists them with the service's filters (`GET …/events`). The two must agree, or a live
 * event would show under filters that a reload drops, or the reverse: each filter here is asked of
 * the service and of the page's function over the same events, and both must pick the same ones.
 */
import { expect } from 'chai';
import { matches, type Filters } from '../../console/src/pages/project/filters.js';
import { Signalboard, type Event } from '../../sdk/src/index.js';
import { signUp } from '../support/accounts.js';
import { baseUrl } from '../support/harness.js';
import { createProject, namespaceName } from '../support/projects.js';

describe('the console’s live filters agree with the service’s', function () {
  this.timeout(60_000);

  it('picks the same events as GET …/events for feed, user_id, tags and words', async () => {
    const owner = await signUp();
    const namespace = namespaceName('filters');
    await createProject(owner.token, { namespace });
    const sb = new Signalboard({ baseUrl: baseUrl(), token: owner.token });
    await sb.feeds.create(namespace, { name: 'billing' });
    const published = (
      await sb.events.publishBatch(namespace, {
        events: [
          {
            feed: 'general',
            event: 'New sign-up',
            description: 'Grace joined from the pricing page.',
            tags: { plan: 'pro', seats: 5 },
            user_id: 'u-1',
          },
          { feed: 'general', event: 'Signup abandoned', description: null, tags: { plan: 'free', trial: true }, user_id: 'u-2' },
          {
            feed: 'billing',
            event: 'Refund issued',
            description: 'Order 42 refunded: 19.5 EUR.',
            tags: { plan: 'pro', amount: 19.5 },
            user_id: 'u-1',
          },
          { feed: 'billing', event: 'Refunded twice', description: 'REFUND policy: Zürich office', tags: { trial: false } },
          {
            feed: 'general',
            event: 'Deployed v2',
            description: 'Released to production',
            tags: { environment: 'production' },
            user_id: 'u-3',
          },
          {
            feed: 'billing',
            event: 'Invoice paid',
            description: 'Paid by card; Zürich',
            tags: { plan: 'team', seats: 12 },
            user_id: 'u-2',
          },
        ],
      })
    ).items;

    const cases: Filters[] = [
      { tag: [] },
      { feed: 'billing', tag: [] },
      { user_id: 'u-1', tag: [] },
      { tag: ['plan:pro'] },
      { tag: ['plan:pro', 'seats:5'] },
      { tag: ['amount:19.5'] },
      { tag: ['trial:false'] },
      { tag: ['trial:true'] },
      { tag: ['seats:12'] },
      { tag: ['plan:nope'] },
      { q: 'refund', tag: [] },
      { q: 'REFUND', tag: [] },
      { q: 'refunded', tag: [] },
      { q: 'sign', tag: [] },
      { q: 'pricing page', tag: [] },
      { q: 'page pricing', tag: [] },
      { q: 'zürich', tag: [] },
      { q: 'order 42', tag: [] },
      { q: 'card', tag: [] },
      { q: 'sign-up', tag: [] },
      { q: 'v2', tag: [] },
      { q: 'v2.4.1', tag: [] },
      { q: 'ada', tag: [] },
      { q: 'ada@example.org', tag: [] },
      { q: '10', tag: [] },
      { q: '!!!', tag: [] },
      { feed: 'general', user_id: 'u-1', q: 'grace', tag: ['plan:pro'] },
      { feed: 'billing', q: 'refund', tag: ['plan:pro'] },
    ];
    const disagreements: string[] = [];
    for (const filters of cases) {
      const listed: Event[] = [];
      for await (const event of sb.events.list(namespace, {
        limit: 100,
        ...(filters.feed ? { feed: filters.feed } : {}),
        ...(filters.user_id ? { user_id: filters.user_id } : {}),
        ...(filters.q ? { q: filters.q } : {}),
        ...(filters.tag.length ? { tag: filters.tag } : {}),
      }))
        listed.push(event);
      const service = listed.map((e) => e.event).sort();
      const page = published
        .filter((e) => matches(e, filters))
        .map((e) => e.event)
        .sort();
      if (JSON.stringify(service) !== JSON.stringify(page))
        disagreements.push(`${JSON.stringify(filters)}: the service lists ${JSON.stringify(service)}, the page ${JSON.stringify(page)}`);
    }
    expect(disagreements).to.deep.equal([]);
  });
});
