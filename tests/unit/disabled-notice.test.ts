/** How the mail that says an endpoint was turned off spells WEBHOOK_DISABLE_AFTER (server/src/webhooks/disabled-notice.ts). */
import { expect } from 'chai';
import { spelledDuration } from '../../server/src/webhooks/disabled-notice.js';

describe('unit: the disable-after period as the mail spells it', function () {
  it('counts in the largest unit that counts the period whole', function () {
    expect(spelledDuration(3 * 86_400_000)).to.equal('3 days');
    expect(spelledDuration(86_400_000)).to.equal('1 day');
    expect(spelledDuration(36 * 3_600_000)).to.equal('36 hours');
    expect(spelledDuration(90 * 60_000)).to.equal('90 minutes');
    expect(spelledDuration(1_000)).to.equal('1 second');
    expect(spelledDuration(1_500)).to.equal('1500 milliseconds');
  });
});
