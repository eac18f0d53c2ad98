/**
 * Settings from the environment: EVENT_RETENTION_DAYS, a whole number of days from 0 (keep events
 * forever) to 36,500, 90 when unset; anything else stops the start with a ConfigError naming it.
 */
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../server/src/config.js';

describe('configuration', () => {
  describe('EVENT_RETENTION_DAYS', () => {
    it('is 90 days when unset or empty', () => {
      expect(loadConfig({}).eventRetentionDays).to.equal(90);
      expect(loadConfig({ EVENT_RETENTION_DAYS: '' }).eventRetentionDays).to.equal(90);
    });

    it('takes a whole number of days from 0 (kept forever) to 36500', () => {
      for (const [raw, days] of [
        ['0', 0],
        ['1', 1],
        ['30', 30],
        ['365', 365],
        ['36500', 36_500],
      ] as const) {
        expect(loadConfig({ EVENT_RETENTION_DAYS: raw }).eventRetentionDays, raw).to.equal(days);
      }
    });

    it('refuses a negative, fractional, too large or non-numeric value, naming the setting', () => {
      for (const raw of ['-1', '1.5', '36501', '1e9', 'abc', '90d', 'Infinity', 'NaN']) {
        expect(() => loadConfig({ EVENT_RETENTION_DAYS: raw }), raw).to.throw(
          ConfigError,
          `EVENT_RETENTION_DAYS must be an integer from 0 to 36500, got "${raw}"`,
        );
      }
    });
  });
});
