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
import { outputDir } from '../support/harness.js';

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
