/**
 * The web console in Chromium against the run's own service (tests/support/harness.ts), which
 * serves console/dist at `/` with its CSP: the journeys a team goes through, hostile event text,
 * the live feed under load, refusals, axe-core on every page, and screenshots (browser.ts says
 * where). Node-side calls go through the SDK, as a team's own code would.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Browser, BrowserContext, Cookie, Page } from 'playwright-core';
import { Signalboard, SignalboardApiError } from '../../sdk/src/index.js';
import { inviteCode, signUp, uniqueName, type TestUser } from '../support/accounts.js';
import { baseUrl, secret } from '../support/harness.js';
import { png } from '../support/png.js';
import { expectAccessible, failOnPageProblems, launch, requireChromium, requireConsoleBuilt, screenshot, signIn } from './browser.js';

const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 860 };

describe('the web console in a browser', function () {
  this.timeout(60_000);

  let browser: Browser;
  let owner: BrowserContext;
  let page: Page;
  const watched = failOnPageProblems();
  const ada = { username: uniqueName('ada'), email: '', password: secret(`pw-${randomBytes(8).toString('hex')}`) };
  ada.email = `${ada.username}@example.com`;
  const namespace = `acme-${randomBytes(3).toString('hex')}`;
  let apiToken = '';
  let sessionCookie: Cookie | undefined;

  /** A page whose script errors and CSP refusals fail the test. */
  const newPage = async (context: BrowserContext): Promise<Page> => watched(await context.newPage());

  before(async function () {
    this.timeout(120_000);
    requireChromium(this);
    await requireConsoleBuilt();
    browser = await launch();
    owner = await browser.newContext({ viewport: DESKTOP, baseURL: baseUrl(), locale: 'en-US' });
    page = await newPage(owner);
  });

  after(async () => {
    await browser?.close();
  });

  it('sends anyone not signed in to the login page, and shows a refused login with the service’s own message', async () => {
    await page.goto('/projects');
    await page.waitForURL(/\/login\?next=%2Fprojects/);
    await page.getByLabel('Username or email').fill('nobody-at-all');
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Log in' }).click();
    const refusal = await new Signalboard({ baseUrl: baseUrl(), maxRetries: 0 }).auth
      .login({ login: 'nobody-at-all', password: 'not the password' })
      .catch((error: unknown) => error);
    expect(refusal).to.be.instanceOf(SignalboardApiError);
    await page
      .getByRole('alert')
      .filter({ hasText: (refusal as Error).message })
      .waitFor();
    await expectAccessible(page, '/login');
    await screenshot(page, 'login');
  });

  it('signs up from an invite link, and the session is an HttpOnly cookie', async () => {
    const code = await inviteCode();
    await page.goto(`/signup?invite=${encodeURIComponent(code)}`);
    expect(await page.getByLabel('Invite code').inputValue()).to.equal(code);
    await expectAccessible(page, '/signup');
    await page.getByLabel('Username').fill(ada.username);
    await page.getByLabel('Email').fill(ada.email);
    await page.getByLabel('Password').fill(ada.password);
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.waitForURL('**/projects');
    await page.getByRole('heading', { name: 'Projects' }).waitFor();
    sessionCookie = (await owner.cookies()).find((c) => c.name === 'sb_session');
    expect(sessionCookie, 'the sb_session cookie').to.not.equal(undefined);
    secret(sessionCookie!.value);
    expect(sessionCookie!.httpOnly).to.equal(true);
    expect(sessionCookie!.sameSite).to.equal('Strict');
    expect(await page.evaluate(() => document.cookie)).to.not.contain('sb_session');
  });

  it('creates a project with an icon', async () => {
    await page.getByText('No projects yet').waitFor();
    await expectAccessible(page, '/projects (empty)');
    await page.getByLabel('Name', { exact: true }).fill('Acme Shop');
    await page.getByLabel('Namespace').fill(namespace);
    await page.getByLabel('Icon').setInputFiles({ name: 'logo.png', mimeType: 'image/png', buffer: png(64, 64, { color: [79, 70, 229] }) });
    await page.getByAltText('Icon preview').waitFor();
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(`**/projects/${namespace}`);
    await page.getByRole('heading', { name: 'Live feed' }).waitFor();
    const icon = page.locator('.project-head img');
    expect(await icon.getAttribute('src')).to.match(/\/cdn\/icons\/[0-9a-f]{64}\.png$/);
    expect(await icon.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).to.equal(64);
  });

  it('makes an API token, shown once with a copy button', async () => {
    await owner.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl() });
    await page.goto('/account');
    await page.getByLabel('Token name').fill('shop backend');
    await page.getByLabel('Project').selectOption(namespace);
    await page.getByRole('button', { name: 'Create token' }).click();
    const shown = page.getByLabel('The new token');
    await shown.waitFor();
    apiToken = secret((await shown.textContent())!.trim());
    expect(apiToken).to.match(/^api_/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal(apiToken);
    await page.getByRole('listitem').filter({ hasText: 'shop backend' }).getByRole('button', { name: 'Revoke' }).waitFor();
    await expectAccessible(page, '/account');
    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, 'account', [shown]);
  });

  it('shows an event published through the SDK in the open feed within a second, as text, with a desktop notification', async () => {
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: apiToken });
    await sdk.events.publish(namespace, 'general', { event: 'Deployed v1.0', emoji: '🚀', tags: { environment: 'production' } });
    // Notifications: allowed, and the constructor recorded (headless Chromium shows none).
    await owner.grantPermissions(['notifications'], { origin: baseUrl() });
    await page.addInitScript(() => {
      const told: string[] = [];
      (window as unknown as { told: string[] }).told = told;
      const Original = window.Notification;
      window.Notification = class extends Original {
        constructor(title: string, options?: NotificationOptions) {
          super(title, options);
          told.push(title);
        }
      };
    });
    await page.goto(`/projects/${namespace}`);
    await page.getByText('Deployed v1.0').waitFor();
    await page.getByText('Live: new events appear at the top.').waitFor();

    const hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
    const started = Date.now();
    const published = sdk.events.publish(namespace, 'general', {
      event: 'New sign-up',
      emoji: '🎉',
      description: hostile,
      tags: { plan: 'pro', seats: 5 },
      user_id: 'user-4711',
      notify: true,
    });
    await page.getByText('New sign-up').waitFor({ timeout: 5_000 });
    const elapsed = Date.now() - started;
    await published;
    console.log(`      published to shown: ${elapsed} ms`);
    expect(elapsed, 'ms from publishing to the row in the page').to.be.below(1_000);

    const row = page.locator('li.event').first();
    expect(await row.locator('.event-title').textContent()).to.equal('New sign-up');
    expect(await row.locator('.event-description').textContent()).to.equal(hostile);
    expect(await row.textContent())
      .to.contain('plan: pro')
      .and.contain('seats: 5')
      .and.contain('user: user-4711');
    expect(await page.locator('main img[src="x"], main script').count()).to.equal(0);
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).to.equal(undefined);
    await page.waitForFunction(() => (window as unknown as { told: string[] }).told.length > 0);
    expect(await page.evaluate(() => (window as unknown as { told: string[] }).told)).to.deep.equal(['🎉 New sign-up']);
    await expectAccessible(page, '/projects/{namespace}');
  });

  it('filters by feed, tag, user and words, in the address; pages back with Load more', async () => {
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: apiToken });
    const older = Array.from({ length: 70 }, (_, i) => ({
      feed: 'general',
      event: `Order ${i} paid`,
      emoji: '💸',
      tags: { plan: i % 2 ? 'pro' : 'free' },
      timestamp: new Date(Date.now() - (80 - i) * 60_000).toISOString(),
    }));
    await sdk.events.publishBatch(namespace, { events: older });
    await page.reload();
    await page.getByText('Order 69 paid').waitFor();
    const region = page.getByRole('region', { name: /Events, newest first/ });
    const loaded = async () => Number(/(\d+) loaded/.exec((await region.getAttribute('aria-label'))!)![1]);
    expect(await loaded()).to.equal(50);
    await page.getByRole('button', { name: 'Load more' }).click();
    await page.waitForFunction(() => /: 7[0-9] loaded/.test(document.querySelector('.event-scroller')?.getAttribute('aria-label') ?? ''));
    expect(await page.locator('li.event').count(), 'rows in the document (virtualised)').to.be.below(40);

    await page.getByLabel('Search').fill('sign-up');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/q=sign-up/);
    await page.getByText('New sign-up').waitFor();
    expect(await loaded()).to.equal(1);
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByRole('textbox', { name: 'Tag' }).fill('plan:free');
    await page.getByLabel('User (user_id)').fill('');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/tag=plan%3Afree/);
    await page.getByText('Order 68 paid').waitFor();
    expect(await page.getByText('Order 69 paid').count()).to.equal(0);
    // A live event that does not match stays out; one that does comes in.
    await sdk.events.publish(namespace, 'general', { event: 'Order 100 paid', tags: { plan: 'pro' } });
    await sdk.events.publish(namespace, 'general', { event: 'Order 101 paid', tags: { plan: 'free' } });
    await page.getByText('Order 101 paid').waitFor();
    expect(await page.getByText('Order 100 paid').count()).to.equal(0);
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByText('Order 100 paid').waitFor();
  });

  it('keeps the page responsive under a thousand events a second', async () => {
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: apiToken });
    // The longest gap between animation frames while the events arrive (a string: tsx would name the inner function).
    await page.evaluate(`{
      window.longestFrame = 0;
      let last = performance.now();
      requestAnimationFrame(function tick(now) {
        window.longestFrame = Math.max(window.longestFrame, now - last);
        last = now;
        requestAnimationFrame(tick);
      });
    }`);
    // The reader has scrolled down a little: what they read must stay in place while events arrive above.
    const region = page.locator('.event-scroller');
    await region.evaluate((element) => (element.scrollTop = 10 * 96 + 20));
    const topRow = () =>
      region.evaluate((element) => {
        const box = element.getBoundingClientRect();
        return document
          .elementFromPoint(box.left + 80, box.top + 30)
          ?.closest('li.event')
          ?.querySelector('.event-title')?.textContent;
      });
    const reading = await topRow();
    expect(reading).to.be.a('string');
    for (let second = 0; second < 3; second++) {
      const started = Date.now();
      await sdk.events.publishBatch(namespace, {
        events: Array.from({ length: 1000 }, (_, i) => ({ feed: 'general', event: `Burst ${second}-${i}`, tags: { burst: second } })),
      });
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1000 - (Date.now() - started))));
    }
    await page.waitForFunction(
      () => /: 3,?\d{3} loaded|3\d{3} loaded/.test(document.querySelector('.event-scroller')?.getAttribute('aria-label') ?? ''),
      undefined,
      { timeout: 10_000 },
    );
    const longest = await page.evaluate(() => (window as unknown as { longestFrame: number }).longestFrame);
    console.log(`      longest frame while 3,000 events arrived: ${Math.round(longest)} ms`);
    expect(longest, 'longest gap between animation frames (ms)').to.be.below(1_000);
    expect(await page.locator('li.event').count(), 'rows in the document').to.be.below(40);
    expect(await topRow(), 'the row the reader was reading').to.equal(reading);
    await page.getByRole('button', { name: '3,000 new events: show the newest' }).click();
    await page.waitForFunction(() => document.querySelector('li.event .event-title')?.textContent === 'Burst 2-999');
    expect(await region.evaluate((element) => element.scrollTop)).to.equal(0);
  });

  it('keeps the newest 5,000 live events, and Load more reaches those it let go', async () => {
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: apiToken });
    for (let batch = 3; batch < 6; batch++)
      await sdk.events.publishBatch(namespace, {
        events: Array.from({ length: 1000 }, (_, i) => ({ feed: 'general', event: `Burst ${batch}-${i}`, tags: { burst: batch } })),
      });
    const region = page.getByRole('region', { name: /Events, newest first/ });
    const loaded = async () => Number(/(\d+) loaded/.exec((await region.getAttribute('aria-label'))!)![1]);
    await page.waitForFunction(
      () => document.querySelector('.event-scroller')?.getAttribute('aria-label')?.endsWith(': 5000 loaded'),
      undefined,
      {
        timeout: 15_000,
      },
    );
    await page.getByRole('button', { name: 'Load more' }).click();
    await page.waitForFunction(
      () => !/: 5000 loaded$/.test(document.querySelector('.event-scroller')?.getAttribute('aria-label') ?? ''),
      undefined,
      {
        timeout: 15_000,
      },
    );
    expect(await loaded()).to.be.above(5000);
    // The first event it brings is the newest that left the live list: Burst 0-999.
    await region.evaluate((element) => (element.scrollTop = 4998 * 96));
    await page.getByText('Burst 0-999', { exact: true }).waitFor();
  });

  it('invites a second person, who accepts in another browser and sees the feed live', async () => {
    const grace: TestUser = await signUp();
    await page.goto(`/projects/${namespace}`);
    await page.getByRole('link', { name: 'Members' }).click();
    await page.waitForURL(`**/projects/${namespace}/members`);
    await page.getByLabel('Username').fill(grace.username);
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByText(`Invited ${grace.username}.`).waitFor();
    await page.getByRole('list', { name: 'Pending invites' }).getByText(grace.username).waitFor();
    await expectAccessible(page, '/projects/{namespace}/members');
    await screenshot(page, 'members');

    const other = await browser.newContext({ viewport: PHONE, baseURL: baseUrl(), locale: 'en-US', isMobile: true, hasTouch: true });
    try {
      const second = await newPage(other);
      await signIn(second, grace, '/projects');
      await second.getByRole('heading', { name: 'Invites for you' }).waitFor();
      await expectAccessible(second, '/projects with an invite, at phone width');
      await second.getByRole('button', { name: 'Accept' }).click();
      await second.getByRole('link', { name: 'Acme Shop' }).click();
      await second.waitForURL(`**/projects/${namespace}`);
      await second.getByText('Live: new events appear at the top.').waitFor();
      await new Signalboard({ baseUrl: baseUrl(), token: apiToken }).events.publish(namespace, 'general', {
        event: 'Refund issued',
        emoji: '↩️',
        description: 'Order 42, 19.00 EUR',
      });
      await second.getByText('Refund issued').waitFor({ timeout: 5_000 });
      await screenshot(second, 'feed-phone');
      // A member sees the members, may leave, and neither invites nor changes the settings.
      await second.getByRole('link', { name: 'Members' }).click();
      await second.getByRole('button', { name: 'Leave project' }).waitFor();
      expect(await second.getByRole('button', { name: 'Invite' }).count()).to.equal(0);
      await expectAccessible(second, '/projects/{namespace}/members as a member, at phone width');
      await second.getByRole('link', { name: 'Settings' }).click();
      await second.getByText(`Only the project's owner, ${ada.username},`).waitFor();
      expect(await second.getByRole('button', { name: 'Save' }).count()).to.equal(0);
    } finally {
      await other.close();
    }
  });

  it('shows the published data on the charts and insights pages, and the insights update', async () => {
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: apiToken });
    const signups = await sdk.insights.create(namespace, { title: 'Sign-ups today', value: 41, emoji: '🎉' });
    await sdk.insights.create(namespace, { title: 'Plan', value: 'pro' });
    await page.goto(`/projects/${namespace}/insights`);
    const tile = page.getByRole('listitem').filter({ hasText: 'Sign-ups today' });
    await tile.getByText('41').waitFor();
    await sdk.insights.increment(namespace, signups.id);
    await tile.getByText('42').waitFor({ timeout: 10_000 });
    await expectAccessible(page, '/projects/{namespace}/insights');
    await screenshot(page, 'insights');

    const counted = (await sdk.events.counts(namespace, { interval: 'day' })).series[0]!.buckets.reduce((sum, b) => sum + b.count, 0);
    await page.getByRole('link', { name: 'Charts' }).click();
    const chart = page.getByRole('img', { name: /^Events per hour, all feeds/ });
    await chart.waitFor();
    expect(await chart.locator('canvas').count()).to.equal(1);
    await page.getByRole('img', { name: /^Events per hour in feed general/ }).waitFor();
    await page.getByLabel('Buckets').selectOption('day');
    await page.getByRole('img', { name: /^Events per day, all feeds/ }).waitFor();
    const caption = await page.locator('figure').first().locator('figcaption').textContent();
    expect(caption).to.contain(`${counted.toLocaleString('en-US')} events`);
    await expectAccessible(page, '/projects/{namespace}/charts');
    await page.getByLabel('Buckets').selectOption('hour');
    await screenshot(page, 'charts');
  });

  it('shows activity, manages feeds and settings, and billing as unavailable when the service has none', async () => {
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`/projects/${namespace}/activity`);
    await page.getByRole('listitem').filter({ hasText: 'project.created' }).first().waitFor();
    await expectAccessible(page, '/projects/{namespace}/activity');

    await page.getByRole('link', { name: 'Feeds' }).click();
    await page.getByLabel('Name', { exact: true }).fill('deploys');
    await page.getByLabel('Emoji').last().fill('🚀');
    await page.getByRole('button', { name: 'Create feed' }).click();
    const feeds = page.getByRole('list', { name: 'Feeds' });
    await feeds.getByText('deploys').waitFor();
    await page.getByRole('button', { name: 'Edit feed deploys' }).click();
    await page.getByLabel('Description').first().fill('Every release');
    await page.getByRole('button', { name: 'Save' }).click();
    await feeds.getByText('Every release').waitFor();
    await expectAccessible(page, '/projects/{namespace}/feeds');
    await page.getByRole('button', { name: 'Delete feed deploys' }).click();
    await feeds.getByText('deploys').waitFor({ state: 'detached' });
    // A refusal shows the envelope's message: the last feed cannot go.
    await page.getByRole('button', { name: 'Delete feed general' }).click();
    await page.getByRole('alert').waitFor();

    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Acme Shop Inc.');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByText('Saved.').waitFor();
    await page.locator('.project-name').getByText('Acme Shop Inc.').waitFor();
    await page.getByRole('button', { name: 'Upgrade' }).click();
    await page.getByText('Billing is unavailable on this service').waitFor();
    await expectAccessible(page, '/projects/{namespace}/settings');
  });

  it('passes axe-core in dark mode and on the public pages', async () => {
    const anonymous = await browser.newContext({ viewport: DESKTOP, baseURL: baseUrl(), locale: 'en-US', colorScheme: 'dark' });
    try {
      const p = await newPage(anonymous);
      await p.goto('/reset-password');
      await p.getByLabel('Email').waitFor();
      await expectAccessible(p, '/reset-password');
      await p.getByLabel('Email').fill('someone@example.com');
      await p.getByRole('button', { name: 'Send me a link' }).click();
      await p.getByRole('status').filter({ hasText: 'link to set a new password' }).waitFor();
      await p.goto('/reset-password?token=rst_not-a-real-token-at-all');
      await p.getByLabel('New password', { exact: true }).fill('a new password');
      await p.getByRole('button', { name: 'Set password' }).click();
      await p.getByRole('alert').waitFor();
      await expectAccessible(p, '/reset-password?token=…');
      await p.goto('/signup');
      await expectAccessible(p, '/signup in dark mode');
    } finally {
      await anonymous.close();
    }
    // What the screenshots show on top of the feed: a few events as a shop would publish them.
    await new Signalboard({ baseUrl: baseUrl(), token: apiToken }).events.publishBatch(namespace, {
      events: [
        { feed: 'general', event: 'Deployed v2.4.1', emoji: '🚀', tags: { environment: 'production', region: 'eu-west' } },
        {
          feed: 'general',
          event: 'Payment failed',
          emoji: '⚠️',
          description: 'Card declined for order 1187 (insufficient funds).',
          tags: { plan: 'team' },
          user_id: 'user-2211',
        },
        {
          feed: 'general',
          event: 'Order 1188 paid',
          emoji: '💸',
          description: '3 items, 84.50 EUR',
          tags: { plan: 'pro', seats: 3 },
          user_id: 'user-4711',
        },
        {
          feed: 'general',
          event: 'New sign-up',
          emoji: '🎉',
          description: 'grace@example.org joined from the pricing page.',
          tags: { plan: 'pro', trial: false },
          user_id: 'user-4712',
          notify: true,
        },
      ],
    });
    await page.emulateMedia({ colorScheme: 'dark' });
    try {
      await page.goto(`/projects/${namespace}`);
      await page.getByText('Live: new events appear at the top.').waitFor();
      await expectAccessible(page, 'the feed in dark mode');
      await screenshot(page, 'feed-dark');
      await page.goto('/projects');
      await page.getByRole('link', { name: 'Acme Shop Inc.' }).waitFor();
      await expectAccessible(page, '/projects in dark mode');
    } finally {
      await page.emulateMedia({ colorScheme: 'light' });
    }
    await page.goto(`/projects/${namespace}`);
    await page.getByText('grace@example.org joined from the pricing page.').waitFor();
    await screenshot(page, 'feed');
    await page.goto('/projects');
    await page.getByRole('link', { name: 'Acme Shop Inc.' }).waitFor();
    await screenshot(page, 'projects');
  });

  it('revokes the token, logs out, and the old cookie is refused', async () => {
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: apiToken, maxRetries: 0 });
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto('/account');
    await page.getByRole('listitem').filter({ hasText: 'shop backend' }).getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No API tokens.').waitFor();
    const refused = await sdk.events.publish(namespace, 'general', { event: 'too late' }).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(SignalboardApiError);
    expect((refused as SignalboardApiError).status).to.equal(401);

    await page.getByRole('button', { name: 'Log out' }).first().click();
    await page.waitForURL('**/login');
    expect((await owner.cookies()).find((c) => c.name === 'sb_session')).to.equal(undefined);

    // The old cookie, put back into a fresh browser, opens nothing; the API refuses it too.
    const replay = await browser.newContext({ baseURL: baseUrl() });
    try {
      await replay.addCookies([sessionCookie!]);
      const p = await newPage(replay);
      await p.goto('/projects');
      await p.waitForURL(/\/login/);
      const me = await fetch(`${baseUrl()}/v1/users/me`, {
        headers: { Cookie: `sb_session=${sessionCookie!.value}`, 'Sec-Fetch-Site': 'same-origin', Origin: new URL(baseUrl()).origin },
      });
      expect(me.status).to.equal(401);
    } finally {
      await replay.close();
    }
  });

  it('logs in again with the keyboard alone', async () => {
    await page.goto('/login');
    // The first field has the focus when the page opens.
    await page.waitForFunction(() => document.activeElement?.getAttribute('autocomplete') === 'username');
    await page.keyboard.type(ada.username);
    await page.keyboard.press('Tab');
    await page.keyboard.type(ada.password);
    await page.keyboard.press('Enter');
    await page.waitForURL('**/projects');
    await page.getByRole('link', { name: 'Acme Shop Inc.' }).focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/projects/${namespace}`);
    await page.getByRole('heading', { name: 'Live feed' }).waitFor();
  });
});
