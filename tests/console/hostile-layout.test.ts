/**
 * The console under hostile text, in Chromium against the run's own service: a project named with a
 * RIGHT-TO-LEFT OVERRIDE (U+202E), events and an insight whose emoji field is a long run of emoji or
 * letters and whose titles are long words with no space, a feed, an API token and a webhook endpoint
 * of the same kind. Every page must hold its shape (emoji clipped to their column, text inside its
 * box, no sideways scrolling of the page) on a desktop and on a phone, the override must not
 * reorder the text around it, and axe-core must find nothing grave, in light and dark.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { Signalboard } from '../../sdk/src/index.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { baseUrl, outputDir } from '../support/harness.js';
import { createProject, namespaceName } from '../support/projects.js';
import { expectAccessible, failOnPageProblems, launch, requireChromium, requireConsoleBuilt, signIn } from './browser.js';

const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 860 };

/** The review's strings, at the longest the contract takes. */
const SPOOFED = 'Report \u202Egnp.exe';
const EMOJI = '🎉'.repeat(32);
const LETTERS = 'W'.repeat(32);
const LONG_TITLE = 'W'.repeat(200);
const LONG_INSIGHT = 'W'.repeat(100);

/**
 * In the page (a string: tsx would wrap named functions in a helper the page does not have): the
 * problems found on it, as sentences, for `checks`:
 * - `inside`: [selector, container selector]: what each element matching the selector draws (its
 *   text and boxes, cut by every ancestor that clips) lies within its closest container's box;
 * - `emoji`: [selector, next selector, max px]: each emoji box draws at most that wide, and ends
 *   before the element after it (in the same row) begins;
 * - `isolated`: [text]: every element that holds the text sits in a <bdi>, or an inline element whose
 *   unicode-bidi isolates it, or a block with unicode-bidi plaintext, and the text's own letters are drawn in their order (a `g` before an
 *   `x` for "gnp.exe");
 * - `after`: [text, selector]: in each row, the first visible letter of the element matching the
 *   selector after the one holding the text is drawn to the right of that text;
 * and always: the page does not scroll sideways.
 */
const PROBLEMS = `(function (checks) {
  var out = [];
  var slack = 1;
  function clipped(el, rect) {
    var r = { left: rect.left, top: rect.top, right: rect.right, bottom: rect.bottom };
    for (var a = el; a && a !== document.documentElement; a = a.parentElement) {
      var s = getComputedStyle(a);
      var box = a.getBoundingClientRect();
      if (s.overflowX !== 'visible') { r.left = Math.max(r.left, box.left); r.right = Math.min(r.right, box.right); }
      if (s.overflowY !== 'visible') { r.top = Math.max(r.top, box.top); r.bottom = Math.min(r.bottom, box.bottom); }
    }
    return r;
  }
  // What the element draws: its box, and each of its texts as far as the boxes around that text
  // let it show (a clipped emoji inside counts only as wide as its box).
  function drawn(el) {
    var r = clipped(el, el.getBoundingClientRect());
    var walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
      var range = document.createRange();
      range.selectNodeContents(node);
      var text = range.getBoundingClientRect();
      if (!text.width || !text.height) continue;
      var shown = clipped(node.parentElement, text);
      if (empty(shown)) continue;
      r = empty(r) ? shown : {
        left: Math.min(r.left, shown.left),
        top: Math.min(r.top, shown.top),
        right: Math.max(r.right, shown.right),
        bottom: Math.max(r.bottom, shown.bottom),
      };
    }
    return r;
  }
  function empty(r) { return r.right - r.left <= 0 || r.bottom - r.top <= 0; }
  function name(el) { return el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ').join('.') : ''); }
  function px(n) { return Math.round(n) + 'px'; }
  (checks.inside || []).forEach(function (pair) {
    document.querySelectorAll(pair[0]).forEach(function (el) {
      var box = el.closest(pair[1]);
      if (!box) return out.push(name(el) + ' has no ' + pair[1] + ' around it');
      var r = drawn(el);
      if (empty(r)) return;
      var c = box.getBoundingClientRect();
      if (r.left < c.left - slack || r.right > c.right + slack)
        out.push(name(el) + ' draws from ' + px(r.left) + ' to ' + px(r.right) + ', outside its ' + pair[1] + ' (' + px(c.left) + ' to ' + px(c.right) + ')');
    });
  });
  (checks.emoji || []).forEach(function (spec) {
    document.querySelectorAll(spec[0]).forEach(function (el) {
      var r = drawn(el);
      if (empty(r)) return;
      if (r.right - r.left > spec[2] + slack) out.push(name(el) + ' draws ' + px(r.right - r.left) + ' wide, more than ' + spec[2] + 'px');
      var next = el.parentElement && el.parentElement.querySelector(spec[1]);
      if (next && r.right > next.getBoundingClientRect().left + slack)
        out.push(name(el) + ' draws to ' + px(r.right) + ', over ' + name(next) + ' from ' + px(next.getBoundingClientRect().left));
    });
  });
  function holders(text) {
    var found = [];
    var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (var node = walker.nextNode(); node; node = walker.nextNode())
      if (node.data.indexOf(text) >= 0 && !node.parentElement.closest('option, title, script')) found.push(node);
    return found;
  }
  function charRect(node, index) {
    var range = document.createRange();
    range.setStart(node, index);
    range.setEnd(node, index + 1);
    return range.getBoundingClientRect();
  }
  (checks.isolated || []).forEach(function (text) {
    var nodes = holders(text);
    if (!nodes.length) out.push('no element holds ' + JSON.stringify(text));
    nodes.forEach(function (node) {
      var el = node.parentElement;
      var isolating = null;
      for (var a = el; a && a !== document.body; a = a.parentElement) {
        var style = getComputedStyle(a);
        var inline = style.display === 'inline';
        // Blocks compute to isolate by the browser's own stylesheet: only an isolate around the text
        // itself, or a block that sets each paragraph's direction from its text, counts.
        if (a.tagName === 'BDI' || style.unicodeBidi === 'plaintext' || (inline && /isolate/.test(style.unicodeBidi))) { isolating = a; break; }
        if (!inline) break;
      }
      if (!isolating) out.push(name(el) + ' holding ' + JSON.stringify(text) + ' is not isolated (unicode-bidi ' + getComputedStyle(el).unicodeBidi + ')');
      var start = node.data.indexOf(text);
      var first = charRect(node, start);
      var last = charRect(node, start + text.length - 1);
      if (first.width && last.width && first.left > last.left)
        out.push(name(el) + ' draws ' + JSON.stringify(text) + ' backwards (its first letter at ' + px(first.left) + ', its last at ' + px(last.left) + ')');
    });
  });
  (checks.after || []).forEach(function (spec) {
    holders(spec[0]).forEach(function (node) {
      var row = node.parentElement.closest('li, .row, div');
      var next = row && row.querySelector(spec[1]);
      if (!next) return;
      var walker = document.createTreeWalker(next, NodeFilter.SHOW_TEXT);
      for (var t = walker.nextNode(); t; t = walker.nextNode()) {
        var i = t.data.search(/\\S/);
        if (i < 0) continue;
        var end = node.data.indexOf(spec[0]) + spec[0].length - 1;
        var textRight = charRect(node, end).right;
        var nextLeft = charRect(t, i).left;
        if (nextLeft < textRight - slack)
          out.push('the text after ' + JSON.stringify(spec[0]) + ' (' + JSON.stringify(t.data.slice(i, i + 12)) + ') is drawn at ' + px(nextLeft) + ', before its end at ' + px(textRight));
        return;
      }
    });
  });
  var page = document.scrollingElement;
  if (page.scrollWidth > page.clientWidth)
    out.push('the page scrolls sideways: ' + page.scrollWidth + 'px of content in ' + page.clientWidth + 'px');
  return out;
})`;

interface Checks {
  inside?: [string, string][];
  emoji?: [string, string, number][];
  isolated?: string[];
  after?: [string, string][];
}

/** No problem `checks` finds on the page as it is. */
async function expectShape(page: Page, what: string, checks: Checks): Promise<void> {
  const found = await page.evaluate<string[]>(`${PROBLEMS}(${JSON.stringify(checks)})`);
  expect(found, `what ${what} draws out of its box, or in the wrong order`).to.deep.equal([]);
}

/** What every project page shows on top: the project's name in its header, isolated, inside the page. */
const HEADER: Checks = {
  inside: [['.project-name', 'main']],
  isolated: ['gnp.exe'],
};

describe('the web console under hostile text', function () {
  this.timeout(60_000);

  let browser: Browser;
  let owner: TestUser;
  const namespace = namespaceName('hostile');
  const watched = failOnPageProblems();

  /** A page of `context`, signed in as the owner, whose script errors and CSP refusals fail the test. */
  async function signedIn(context: BrowserContext): Promise<Page> {
    const page = watched(await context.newPage());
    await signIn(page, owner, '/projects');
    return page;
  }

  before(async function () {
    this.timeout(120_000);
    requireChromium(this);
    await requireConsoleBuilt();
    owner = await signUp({ email: `${'w'.repeat(200)}@example.com` });
    await createProject(owner.token, { name: SPOOFED, namespace });
    await createProject(owner.token, { name: LONG_INSIGHT, namespace: namespaceName('wide') });
    const sdk = new Signalboard({ baseUrl: baseUrl(), token: owner.token });
    await sdk.feeds.create(namespace, { name: 'w'.repeat(40), description: 'D'.repeat(500), emoji: LETTERS });
    await sdk.events.publishBatch(namespace, {
      events: [
        { feed: 'general', event: LONG_TITLE, emoji: EMOJI, description: 'D'.repeat(4000), user_id: 'U'.repeat(160) },
        { feed: 'general', event: LONG_TITLE, emoji: LETTERS, tags: { ['k'.repeat(32)]: 'V'.repeat(160) } },
        { feed: 'general', event: SPOOFED, emoji: '\u202E🎉', description: SPOOFED },
      ],
    });
    await sdk.insights.create(namespace, { title: LONG_INSIGHT, value: 'V'.repeat(256), emoji: EMOJI });
    await sdk.insights.create(namespace, { title: SPOOFED, value: 7, emoji: LETTERS });
    await sdk.tokens.create({ name: SPOOFED, scopes: ['read'] });
    await sdk.tokens.create({ name: LONG_INSIGHT, scopes: ['read'] });
    await sdk.webhooks.create(namespace, { url: `https://hooks.example.com/${'w'.repeat(1500)}`, description: 'D'.repeat(500) });
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
  });

  // The layout does not depend on the colour scheme: each size is seen once, in one of the two,
  // and axe-core judges both schemes' contrast that way.
  for (const [device, viewport, colorScheme] of [
    ['a desktop', DESKTOP, 'light'],
    ['a phone', PHONE, 'dark'],
  ] as const)
    describe(`on ${device} in ${colorScheme}`, function () {
      let context: BrowserContext;
      let page: Page;
      const at = `on ${device} in ${colorScheme}`;

      before(async function () {
        this.timeout(120_000);
        context = await browser.newContext({
          viewport,
          baseURL: baseUrl(),
          locale: 'en-US',
          colorScheme,
          ...(viewport === PHONE ? { isMobile: true, hasTouch: true } : {}),
        });
        page = await signedIn(context);
      });

      after(async () => {
        await context?.close();
      });

      it('lists the projects with their names inside their cards, the override isolated and shown', async () => {
        await page.goto('/projects');
        await page.getByRole('link', { name: /gnp\.exe/ }).waitFor();
        await expectShape(page, `/projects ${at}`, {
          inside: [
            ['.card-title', '.card'],
            ['.card .muted', '.card'],
          ],
          isolated: ['gnp.exe'],
        });
        await expectAccessible(page, `/projects with hostile names ${at}`);
      });

      it('keeps emoji in their column and titles, descriptions and tags inside the feed’s rows', async () => {
        await page.goto(`/projects/${namespace}`);
        await page.locator('li.event').nth(2).waitFor();
        await expectShape(page, `the live feed ${at}`, {
          ...HEADER,
          inside: [...HEADER.inside!, ['.event-title', '.event-body'], ['.event-description', '.event-body'], ['.tags', '.event-body']],
          emoji: [['.event-emoji', '.event-body', 40]],
        });
        await expectAccessible(page, `the live feed with hostile events ${at}`);
      });

      it('keeps insights’ emoji, titles and values inside their tiles', async () => {
        await page.goto(`/projects/${namespace}/insights`);
        await page.locator('.tile').nth(1).waitFor();
        await expectShape(page, `/insights ${at}`, {
          ...HEADER,
          inside: [...HEADER.inside!, ['.tile-title', '.tile'], ['.tile-value', '.tile']],
          emoji: [['.tile .emoji', '.insight-title', 32]],
        });
        await expectAccessible(page, `/insights with hostile insights ${at}`);
      });

      for (const [tab, ready] of [
        ['feeds', '.rows li:nth-child(2)'],
        ['charts', 'figure'],
        ['activity', '.activity li'],
        ['members', '.rows li'],
        ['webhooks', '.webhook'],
      ] as const)
        it(`keeps names, addresses and descriptions inside their rows on /${tab}`, async () => {
          await page.goto(`/projects/${namespace}/${tab}`);
          await page.locator(ready).first().waitFor();
          await expectShape(page, `/${tab} ${at}`, {
            ...HEADER,
            inside: [...HEADER.inside!, ['.rows .grow', '.row'], ['figcaption', 'figure']],
            emoji: [['.rows .emoji', '.grow', 32]],
          });
          await expectAccessible(page, `/${tab} with hostile text ${at}`);
        });

      it('keeps token names isolated, with what follows them drawn after them, on /account', async () => {
        await page.goto('/account');
        await page.getByRole('list', { name: 'API tokens' }).locator('li').nth(1).waitFor();
        await expectShape(page, `/account ${at}`, {
          inside: [
            ['.rows .grow', '.row'],
            ['main p', 'main'],
          ],
          isolated: ['gnp.exe'],
          after: [['gnp.exe', '.muted']],
        });
        await expectAccessible(page, `/account with hostile names ${at}`);
      });

      it('leaves screenshots of the feed, the insights and the projects in the run’s output', async () => {
        // For a person to look at: the run's output folder, never docs/screenshots.
        const shots = path.join(outputDir, 'screenshots', 'hostile');
        mkdirSync(shots, { recursive: true });
        await page.goto(`/projects/${namespace}`);
        await page.locator('li.event').nth(2).waitFor();
        await page.screenshot({ path: path.join(shots, `feed-${viewport.width}-${colorScheme}.png`) });
        await page.goto(`/projects/${namespace}/insights`);
        await page.locator('.tile').nth(1).waitFor();
        await page.screenshot({ path: path.join(shots, `insights-${viewport.width}-${colorScheme}.png`), fullPage: true });
        await page.goto('/projects');
        await page.locator('.card').nth(1).waitFor();
        await page.screenshot({ path: path.join(shots, `projects-${viewport.width}-${colorScheme}.png`) });
      });
    });
});
