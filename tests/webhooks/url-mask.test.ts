/**
 * A Slack or Discord address is masked by two hands: url-mask.ts's `shownUrl` for the answers and
 * the mail, and the SQL of `shownUrlSql` for the `webhook.disabled` activity entries the statement
 * turning an endpoint off writes itself. Both must show every address alike.
 */
import { expect } from 'chai';
import { shownUrlSql } from '../../server/src/db/repositories/webhook-outbox.js';
import { shownUrl } from '../../server/src/webhooks/url-mask.js';
import { sql } from '../support/harness.js';

// Addresses as an endpoint keeps them (a URL's `href`).
const ADDRESSES = [
  'https://hooks.slack.com/services/T0123/B0456/abcdefSECRET',
  'https://discord.com/api/webhooks/123456789/token-SECRET',
  'https://discord.com/api/webhooks/123456789/token-SECRET/',
  'https://example.com:8443/a/b/c/d/e/SECRET?x=1#frag',
  'https://example.com/SECRET',
  'https://example.com/',
  'https://example.com//SECRET',
  'https://example.com/a//SECRET//',
];

describe('webhooks: a masked address, in SQL as in the service', function () {
  for (const format of ['slack', 'discord', 'standard'] as const) {
    it(`masks a ${format} endpoint's address alike`, async () => {
      const rows = await sql<{ shown: string }>(
        `select ${shownUrlSql('a.url', 'f.format')} as shown from jsonb_array_elements_text(?::jsonb) with ordinality a(url, n), (select ?::text as format) f(format) order by a.n`,
        [JSON.stringify(ADDRESSES), format],
      );
      expect(rows.map((r) => r.shown)).to.deep.equal(ADDRESSES.map((url) => shownUrl(url, format)));
    });
  }
});
