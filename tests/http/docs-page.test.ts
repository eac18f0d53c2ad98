/**
 * The reference page in a real browser: Debian's Chromium, driven by playwright-core (never a
 * browser download of its own). It must render the contract's operations from assets this service
 * serves, with no request leaving for another origin.
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { chromium } from 'playwright-core';
import { baseUrl, outputDir } from '../support/harness.js';
import { http } from '../support/http.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

describe('the API reference page at /docs', function () {
  this.timeout(120_000);

  it('GET / says where the API, this page and the contract are; other methods on / are 405 or 404 as for any path', async () => {
    const home = await http('GET', '/');
    expect(home.status).to.equal(200);
    expect(home.headers.get('content-type')).to.equal('application/json; charset=utf-8');
    expect(home.json).to.deep.equal({
      success: true,
      data: {
        message: 'Signalboard. The API is at /v1, its reference at /docs, its contract at /v1/openapi.json.',
        api: '/v1',
        reference: '/docs',
        contract: '/v1/openapi.json',
      },
    });
    for (const link of ['/v1', '/docs', '/v1/openapi.json']) expect((await http('GET', link)).status, link).to.equal(200);
    const head = await http('HEAD', '/');
    expect([head.status, head.text]).to.deep.equal([200, '']);
    const post = await http('POST', '/');
    expect(post.status).to.be.oneOf([404, 405]);
    expect(post.json.success).to.equal(false);
  });

  it('is served with a CSP that allows only this origin', async () => {
    const page = await http('GET', '/docs');
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).to.contain("script-src 'self'").and.contain("default-src 'none'");
    expect(page.text)
      .to.contain('/docs/redoc.standalone.js')
      .and.not.match(/https?:\/\//);
    const bundle = await http('GET', '/docs/redoc.standalone.js');
    expect(bundle.status).to.equal(200);
    expect(bundle.headers.get('content-type')).to.contain('javascript');
  });

  it('renders the operations in headless Chromium, offline, and leaves a screenshot', async function () {
    if (!existsSync(CHROMIUM)) {
      const reason = `no Chromium at ${CHROMIUM}: install Debian's chromium package (CI does) or set CHROMIUM_PATH`;
      if (process.env.REQUIRE_BROWSER) throw new Error(reason);
      console.log(`      skipped: ${reason}`);
      this.skip();
    }
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage();
      // Requests for another origin that got an answer: none may (Redoc's own badge image is
      // refused by the page's CSP, which shows up as a failed request).
      const foreign: string[] = [];
      const origin = new URL(baseUrl()).origin;
      const isForeign = (raw: string) => {
        const url = new URL(raw);
        return !['data:', 'blob:'].includes(url.protocol) && url.origin !== origin;
      };
      page.on('requestfinished', (request) => {
        if (isForeign(request.url())) foreign.push(request.url());
      });
      page.on('requestfailed', (request) => {
        if (isForeign(request.url()) && !/csp/i.test(request.failure()?.errorText ?? '')) foreign.push(request.url());
      });
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(error.message));
      await page.goto(`${baseUrl()}/docs`, { waitUntil: 'networkidle' });
      await page.getByText('Signalboard API', { exact: false }).first().waitFor({ timeout: 60_000 });
      const text = await page.locator('body').innerText();
      for (const operation of ['/v1/auth/signup', '/v1/projects/{namespace}', '/v1/projects/{namespace}/feeds/{feed}/events']) {
        expect(text, operation).to.contain(operation);
      }
      mkdirSync(outputDir, { recursive: true });
      const screenshot = path.join(outputDir, 'docs-page.png');
      await page.screenshot({ path: screenshot, fullPage: false });
      console.log(`      screenshot: ${path.relative(process.cwd(), screenshot)}`);
      expect(foreign, 'requests to other origins').to.deep.equal([]);
      expect(problems, 'page errors').to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });
});
