/**
 * A project's address opened without a session (a link in a message, Back after logging out) leads
 * to the login page at the top of the console, `/login?next=<the whole address>`, and after logging
 * in to the page asked for; never to a login page nested under the project's address. In Chromium
 * against the run's service.
 */
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { signUp, type TestUser } from '../support/accounts.js';
import { baseUrl } from '../support/harness.js';
import { createProject, namespaceName } from '../support/projects.js';
import { launch, requireChromium, signIn } from './browser.js';

describe('console: project links without a session', function () {
  this.timeout(120_000);
  let browser: Browser;
  let owner: TestUser;
  const namespace = namespaceName('links');
  const charts = `/projects/${namespace}/charts`;
  const loginForCharts = `/login?next=${encodeURIComponent(charts)}`;

  before(async function () {
    requireChromium(this);
    owner = await signUp();
    await createProject(owner.token, { name: 'Linked', namespace });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  const newPage = async (): Promise<Page> => (await browser.newContext({ baseURL: baseUrl() })).newPage();
  const pathOf = (page: Page) => {
    const url = new URL(page.url());
    return url.pathname + url.search;
  };

  it('goes to /login with the whole address as next, stays there on reload, and comes back to the page after logging in', async () => {
    const page = await newPage();
    await page.goto(charts);
    await page.getByLabel('Username or email').waitFor();
    expect(pathOf(page)).to.equal(loginForCharts);

    await page.reload();
    await page.getByLabel('Username or email').waitFor();
    expect(pathOf(page)).to.equal(loginForCharts);

    // The login page it was sent to is the one signIn opens: logging in there comes back to the charts.
    await signIn(page, owner, charts);
    expect(pathOf(page)).to.equal(charts);
  });

  it('Back after logging out from a project page leads to the top login page for that page', async () => {
    const page = await newPage();
    await signIn(page, owner, charts);
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL('**/login');
    await page.goBack();
    await page.waitForURL((url) => url.pathname === '/login' && url.search !== '');
    expect(pathOf(page)).to.equal(loginForCharts);
    await page.getByLabel('Username or email').waitFor();
  });
});
