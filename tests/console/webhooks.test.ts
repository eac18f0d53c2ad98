/**
 * The console's webhooks page in Chromium against the run's own service: a member signs in, creates
 * an endpoint (its secret shown once, with a copy button), sees it listed, sends a test (the
 * service's default guard and the sandbox's network leave https://hooks.example.com unreachable or
 * refused, so the page shows what came back, an error or a status), reads a delivery and sends it
 * again, rotates the secret, disables the endpoint and deletes it; axe-core on the page.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { Signalboard } from '../../sdk/src/index.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { baseUrl, sql } from '../support/harness.js';
import { createProject, namespaceName } from '../support/projects.js';
import { expectAccessible, failOnPageProblems, launch, requireChromium, requireConsoleBuilt, screenshot, signIn } from './browser.js';

const ENDPOINT = 'https://hooks.example.com/x';
/** What a test or an attempt shows: a status or no answer, with how long it took. */
const OUTCOME = /(answered \d{3}|no answer) in \d+ ms/;

describe('the console’s webhooks page in a browser', function () {
  this.timeout(60_000);

  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let owner: TestUser;
  let sdk: Signalboard;
  const namespace = namespaceName('hooks');
  const watched = failOnPageProblems();

  before(async function () {
    this.timeout(120_000);
    requireChromium(this);
    await requireConsoleBuilt();
    owner = await signUp();
    await createProject(owner.token, { name: 'Hooks Shop', namespace });
    sdk = new Signalboard({ baseUrl: baseUrl(), token: owner.token });
    browser = await launch();
    context = await browser.newContext({ viewport: { width: 1280, height: 860 }, baseURL: baseUrl(), locale: 'en-US' });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl() });
    page = watched(await context.newPage());
  });

  after(async () => {
    await browser?.close();
  });

  it('creates an endpoint with its secret shown once, tests it, shows its deliveries, disables and deletes it', async () => {
    await signIn(page, owner, `/projects/${namespace}/webhooks`);
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
    expect(await page.getByRole('link', { name: 'Webhooks' }).getAttribute('aria-current')).to.equal('page');
    await page.getByText('No webhook endpoints yet.').waitFor();

    // Create: the URL, a description, format, a feed, a tag.
    await page.getByLabel('URL', { exact: true }).fill(ENDPOINT);
    await page.getByLabel('Description').fill('Orders <b>team</b>');
    await page.getByLabel('Format').selectOption('standard');
    await page.getByLabel('general', { exact: true }).check();
    await page.getByLabel('Only events with these tags').fill('plan:pro');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const shown = page.getByLabel('The new signing secret');
    await shown.waitFor();
    const first = (await shown.textContent())!.trim();
    expect(first).to.match(/^whsec_/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal(first);

    // Listed, with its description as text, and stored as asked.
    const row = page.getByRole('list', { name: 'Webhook endpoints' }).getByRole('listitem').filter({ hasText: ENDPOINT });
    await row.getByText('Orders <b>team</b>').waitFor();
    await row.getByText('enabled', { exact: true }).waitFor();
    await row.getByText(`made by ${owner.username}`).waitFor();
    const [endpoint] = (await sdk.webhooks.list(namespace).page()).items;
    expect(endpoint).to.deep.include({ url: ENDPOINT, description: 'Orders <b>team</b>', format: 'standard', enabled: true });
    expect(endpoint!.filter).to.deep.include({ feeds: ['general'], tags: ['plan:pro'], notify_only: false });
    await expectAccessible(page, '/projects/…/webhooks');

    // Shown once: a reload has the endpoint, not its secret.
    await page.reload();
    await row.waitFor();
    expect(await page.getByLabel('The new signing secret').count()).to.equal(0);

    // A test: whatever came back (a refused or unreachable address here) is shown.
    await row.getByRole('button', { name: `Send a test to ${ENDPOINT}` }).click();
    await row.locator('.test-result').getByText(OUTCOME).waitFor({ timeout: 25_000 });

    // A delivery of a matching event, in the log, sent again.
    await sdk.events.publish(namespace, 'general', { event: 'Order paid', tags: { plan: 'pro' } });
    await row.getByRole('button', { name: `Deliveries of ${ENDPOINT}` }).click();
    const log = row.getByRole('region', { name: `Deliveries of ${ENDPOINT}` });
    const delivery = log.getByRole('listitem').filter({ hasText: 'event.created' }).first();
    await delivery.waitFor();
    await delivery.getByRole('button', { name: /^Redeliver / }).click();
    await delivery
      .getByRole('list', { name: /^Attempts of delivery / })
      .getByText(OUTCOME)
      .first()
      .waitFor({ timeout: 25_000 });

    // A new secret, shown once.
    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: `Rotate the secret of ${ENDPOINT}` }).click();
    await shown.waitFor();
    const second = (await shown.textContent())!.trim();
    expect(second)
      .to.match(/^whsec_/)
      .and.not.equal(first);
    await expectAccessible(page, '/projects/…/webhooks with a delivery log and a test result');
    await screenshot(page, 'webhooks', [shown]);
    await page.emulateMedia({ colorScheme: 'dark' });
    await expectAccessible(page, '/projects/…/webhooks in dark mode');
    await page.emulateMedia({ colorScheme: 'light' });

    // Disable.
    await row.getByRole('button', { name: `Disable ${ENDPOINT}` }).click();
    await row.getByRole('button', { name: `Enable ${ENDPOINT}` }).waitFor();
    await row.getByText('disabled', { exact: true }).waitFor();
    expect((await sdk.webhooks.get(namespace, endpoint!.id)).enabled).to.equal(false);

    // Delete, after the confirmation.
    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: `Delete ${ENDPOINT}` }).click();
    await page.getByText('No webhook endpoints yet.').waitFor();
    expect((await sdk.webhooks.list(namespace).page()).items).to.deep.equal([]);
  });

  it('shows a Slack address whole once, when it is made, and masked in the list after', async () => {
    const secretPart = 'XXXXXXXXXXXXXXXXXXXXXXXX';
    const whole = `https://hooks.slack.com/services/T0001/B0001/${secretPart}`;
    const masked = 'https://hooks.slack.com/services/T0001/B0001/••••';
    await page.goto(`/login?next=${encodeURIComponent(`/projects/${namespace}/webhooks`)}`);
    await page.waitForURL(/\/(login|projects\/)/);
    if (page.url().includes('/login')) {
      await page.getByLabel('Username or email').fill(owner.username);
      await page.getByLabel('Password').fill(owner.password);
      await page.getByRole('button', { name: 'Log in' }).click();
    }
    await page.waitForURL(`**/projects/${namespace}/webhooks`);
    await page.getByLabel('URL', { exact: true }).fill(whole);
    await page.getByLabel('Format').selectOption('slack');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.getByLabel('The new signing secret').waitFor();
    await page.getByRole('status').filter({ hasText: whole }).waitFor();
    const row = page.getByRole('list', { name: 'Webhook endpoints' }).getByRole('listitem').filter({ hasText: masked });
    await row.getByText(masked, { exact: true }).waitFor();
    // Turned off: nothing is sent to Slack from a test.
    await row.getByRole('button', { name: `Disable ${masked}` }).click();
    await row.getByRole('button', { name: `Enable ${masked}` }).waitFor();

    await page.reload();
    await row.waitFor();
    expect(await page.content()).to.not.include(secretPart);
    const [endpoint] = (await sdk.webhooks.list(namespace).page()).items;
    expect(endpoint).to.deep.include({ url: masked, format: 'slack', enabled: false });
    await sdk.webhooks.delete(namespace, endpoint!.id);
  });

  it('says why the service turned endpoints off with the limits the service answers', async () => {
    const failing = await sdk.webhooks.create(namespace, { url: `${ENDPOINT}/failing` });
    const backlog = await sdk.webhooks.create(namespace, { url: `${ENDPOINT}/backlog` });
    for (const [endpoint, reason] of [
      [failing, 'failing'],
      [backlog, 'backlog'],
    ] as const)
      await sql('update webhook_endpoints set enabled = false, disabled_reason = ? where id = ?', [reason, endpoint.id]);
    // An operator's WEBHOOK_DISABLE_AFTER of 12 hours, as GET /v1 would say it.
    await page.route('**/v1', async (route) => {
      const response = await route.fetch();
      const answer = (await response.json()) as { data: { webhooks: { disable_after_seconds: number } } };
      answer.data.webhooks.disable_after_seconds = 43_200;
      await route.fulfill({ response, json: answer });
    });
    try {
      await page.goto(`/projects/${namespace}/webhooks`);
      await page.getByText('turned off by the service: every delivery failed for 12 hours').waitFor();
      const { max_pending_deliveries: room } = (await sdk.meta.root()).webhooks;
      await page.getByText(`turned off by the service: ${room.toLocaleString('en-US')} deliveries waited for it`).waitFor();
    } finally {
      await page.unroute('**/v1');
    }
    await sdk.webhooks.delete(namespace, failing.id);
    await sdk.webhooks.delete(namespace, backlog.id);
  });
});
