/**
 * `WEBHOOK_DISABLE_AFTER` in server/src/config.ts on its own: from a second to a year, so that the
 * service description (`GET /v1`) can state it in whole seconds within its contract's bounds.
 */
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../server/src/config.js';

const load = (value: string) => loadConfig({ DATABASE_URL: '', DATA_DIR: '/tmp/x', WEBHOOK_DISABLE_AFTER: value });

describe('WEBHOOK_DISABLE_AFTER (config)', () => {
  it('takes a duration from 1s to 365d', () => {
    expect(load('1s').webhooks.disableAfterMs).to.equal(1000);
    expect(load('12h').webhooks.disableAfterMs).to.equal(12 * 3_600_000);
    expect(load('365d').webhooks.disableAfterMs).to.equal(365 * 86_400_000);
  });

  it('refuses less than a second and more than a year, naming the setting', () => {
    for (const value of ['0s', '999ms', '366d', '999999999d']) {
      expect(() => load(value), value).to.throw(ConfigError, /^WEBHOOK_DISABLE_AFTER: ".*" is not between 1s and 365d$/);
    }
  });
});
