/**
 * The charts page of a project with more feeds than one answer of counts holds by the minute
 * (MAX_COUNTS over a day's 1,441 minute buckets): the service refuses the split per feed (400 at
 * `/query/group_by`), and the page charts all feeds together, says why the feeds are not charted
 * one by one, and charts each again with longer buckets. In Chromium against the run's service.
 */
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { Signalboard } from '../../sdk/src/index.js';
import { MAX_COUNTS } from '../../server/src/domain/event-counts.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { baseUrl } from '../support/harness.js';
import { createProject, namespaceName } from '../support/projects.js';
import { expectAccessible, failOnPageProblems, launch, requireChromium, signIn } from './browser.js';

const FEEDS = Math.ceil(MAX_COUNTS / 1441);

describe('console: charts of a project with many feeds', function () {
  this.timeout(120_000);
  let browser: Browser;
  let owner: TestUser;
  const namespace = namespaceName('charts');
  const watched = failOnPageProblems();

  before(async function () {
    requireChromium(this);
    owner = await signUp();
    await createProject(owner.token, { name: 'Many feeds', namespace });
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: owner.token });
    for (let i = 1; i < FEEDS; i++) await sdk.feeds.create(namespace, { name: `feed-${i}` });
    await sdk.events.publish(namespace, 'feed-1', { event: 'Counted' });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  async function chartsPage(): Promise<Page> {
    const page = watched(await (await browser.newContext({ baseURL: baseUrl() })).newPage());
    await signIn(page, owner, `/projects/${namespace}/charts`);
    return page;
  }

  it('charts all feeds together by the minute and says so, and each feed by the hour', async () => {
    const page = await chartsPage();
    await page.locator('figure.chart').first().waitFor();
    expect(await page.locator('figure.chart').count()).to.equal(1 + FEEDS);

    await page.getByLabel('Buckets').selectOption('minute');
    await page.getByText('Too many feeds to chart each one by the minute').waitFor();
    await page.waitForFunction(() => document.querySelectorAll('figure.chart').length === 1);
    expect(await page.locator('figure.chart figcaption').innerText()).to.match(/^All feeds\s+1 events$/);
    await expectAccessible(page, 'the charts page by the minute');

    await page.getByLabel('Buckets').selectOption('hour');
    await page.waitForFunction((count) => document.querySelectorAll('figure.chart').length === count, 1 + FEEDS);
    expect(await page.getByText('Too many feeds').count()).to.equal(0);
  });
});
