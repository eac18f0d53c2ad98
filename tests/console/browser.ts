/**
 * The console's browser tests drive Debian's Chromium through playwright-core (never a browser
 * download of a test tool's own): skipped without it, except with REQUIRE_BROWSER=1 (CI), where a
 * missing browser fails the run. Accessibility is judged by axe-core (@axe-core/playwright).
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { expect } from 'chai';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { baseUrl, outputDir } from '../support/harness.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Skips the calling test (or suite hook) when there is no Chromium, unless REQUIRE_BROWSER is set. */
export function requireChromium(context: Mocha.Context): void {
  if (existsSync(CHROMIUM)) return;
  const reason = `no Chromium at ${CHROMIUM}: install Debian's chromium package (CI does) or set CHROMIUM_PATH`;
  if (process.env.REQUIRE_BROWSER) throw new Error(reason);
  console.log(`      skipped: ${reason}`);
  context.skip();
}

export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // Hidden or occluded pages would otherwise get no animation frames, and the feed renders on them.
      '--disable-renderer-backgrounding',
      '--disable-background-timer-throttling',
      '--disable-backgrounding-occluded-windows',
    ],
  });
}

/** Fails the suite's run at once unless the service serves the built console. */
export async function requireConsoleBuilt(): Promise<void> {
  const home = await fetch(`${baseUrl()}/`, { headers: { Accept: 'text/html' } });
  if (!(await home.text()).includes('<div id="app">'))
    throw new Error('the service does not serve the console: build it first (`npm run build:console`; npm test does)');
}

/**
 * For the suite it is called in: the pages given to the function it returns have their script
 * errors and Content Security Policy refusals recorded, and a test during which any was reported
 * fails (an `afterEach` of the suite) with what they said.
 */
export function failOnPageProblems(): (page: Page) => Page {
  const problems: string[] = [];
  afterEach(function () {
    if (problems.length) {
      const found = problems.splice(0);
      throw new Error(`the page reported problems:\n${found.join('\n')}`);
    }
  });
  return (page) => {
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy|Refused to/i.test(message.text()))
        problems.push(`console: ${message.text()}`);
    });
    return page;
  };
}

/** Signs `user` in on `page` through the login form, asking for `path`, and waits until it is shown. */
export async function signIn(page: Page, user: { username: string; password: string }, path: string): Promise<void> {
  await page.goto(`/login?next=${encodeURIComponent(path)}`);
  await page.getByLabel('Username or email').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`**${path}`);
}

/** axe-core on the page as it is: no violation of impact serious or critical. */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  const results = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']).analyze();
  const grave = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const described = grave.map((v) => `${v.id} (${v.impact}): ${v.help}; at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  expect(described, `axe-core on ${what}`).to.deep.equal([]);
}

/**
 * Where screenshots go: docs/screenshots/ (committed, shown by the README) when UPDATE_SCREENSHOTS
 * is set, else the run's output folder, so that an ordinary run leaves the work tree as it was.
 */
export const screenshotDir = process.env.UPDATE_SCREENSHOTS ? path.resolve('docs/screenshots') : path.join(outputDir, 'screenshots');

/** The page as it shows, `mask` (secrets such as a new token) painted over. */
export async function screenshot(page: Page, name: string, mask: Locator[] = []): Promise<void> {
  mkdirSync(screenshotDir, { recursive: true });
  await page.screenshot({ path: path.join(screenshotDir, `${name}.png`), fullPage: false, mask });
}
