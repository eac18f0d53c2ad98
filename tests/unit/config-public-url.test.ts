/**
 * `PUBLIC_URL` in server/src/config.ts on its own: what it accepts (an http(s) origin, optionally
 * with a path prefix) and refuses with a message naming it, the defaults it gives `CDN_URL` and
 * `PASSWORD_RESET_URL` (the console's reset page), none for the e-mail change pages (the console
 * has none), explicit settings winning, and `SMTP_URL` accepted with it in place of
 * `PASSWORD_RESET_URL`. Without it, everything is as before. tests/accounts/public-url.test.ts
 * follows the mailed link and the first-run line on running services.
 */
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../server/src/config.js';

const base = { DATABASE_URL: '', DATA_DIR: '/tmp/x' };
const SMTP = { SMTP_URL: 'smtp://u:hunter2@mail.example.com:587', SMTP_FROM: 'noreply@example.com' };

const load = (env: Record<string, string>) => loadConfig({ ...base, ...env });

function refused(env: Record<string, string>): string {
  try {
    load(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

describe('PUBLIC_URL (config)', () => {
  it('accepts an http(s) origin, with or without a path prefix, trailing slashes dropped', () => {
    const cases: [string, string][] = [
      ['https://signalboard.example.com', 'https://signalboard.example.com'],
      ['https://signalboard.example.com/', 'https://signalboard.example.com'],
      ['http://localhost:3000', 'http://localhost:3000'],
      ['https://Example.COM:8443/tools/signalboard//', 'https://example.com:8443/tools/signalboard'],
      ['https://example.com:443/sb', 'https://example.com/sb'],
    ];
    for (const [raw, expected] of cases) expect(load({ PUBLIC_URL: raw }).publicUrl, raw).to.equal(expected);
  });

  it('refuses anything else with a message naming it, which never shows the value', () => {
    for (const bad of [
      'signalboard.example.com',
      'not a url',
      'ftp://example.com',
      'ws://example.com',
      'https://user:hunter2@example.com',
      'https://example.com/?x=1',
      'https://example.com/sb?',
      'https://example.com/#top',
      'mailto:ops@example.com',
    ]) {
      const message = refused({ PUBLIC_URL: bad });
      expect(message, bad).to.include('PUBLIC_URL');
      expect(message, bad).to.not.include('hunter2');
    }
  });

  it('unset or empty: no defaults, as before', () => {
    for (const env of [{}, { PUBLIC_URL: '' }] as Record<string, string>[]) {
      const config = load(env);
      expect(config.publicUrl).to.equal(undefined);
      expect(config.cdnUrl).to.equal(undefined);
      expect(config.passwordReset).to.deep.equal({ smtp: undefined, url: undefined });
      expect(config.emailChange).to.deep.equal({ confirmUrl: undefined, revertUrl: undefined });
    }
    const message = refused(SMTP);
    expect(message).to.include('PASSWORD_RESET_URL');
    expect(message).to.not.include('hunter2');
  });

  it('is the default of CDN_URL and PASSWORD_RESET_URL (the console page), and of neither e-mail change page', () => {
    const config = load({ PUBLIC_URL: 'https://signalboard.example.com/' });
    expect(config.cdnUrl).to.equal('https://signalboard.example.com/cdn');
    expect(config.passwordReset).to.deep.equal({ smtp: undefined, url: 'https://signalboard.example.com/reset-password?token=' });
    expect(config.emailChange).to.deep.equal({ confirmUrl: undefined, revertUrl: undefined });

    const prefixed = load({ PUBLIC_URL: 'https://example.com/signalboard' });
    expect(prefixed.cdnUrl).to.equal('https://example.com/signalboard/cdn');
    expect(prefixed.passwordReset.url).to.equal('https://example.com/signalboard/reset-password?token=');
  });

  it('loses to explicit settings', () => {
    const config = load({
      PUBLIC_URL: 'https://signalboard.example.com',
      CDN_URL: 'https://cdn.example.com/icons-here/',
      PASSWORD_RESET_URL: 'https://app.example.com/reset?token=',
      EMAIL_CONFIRM_URL: 'https://app.example.com/confirm?token=',
      EMAIL_REVERT_URL: 'https://app.example.com/revert?token=',
      ...SMTP,
    });
    expect(config.publicUrl).to.equal('https://signalboard.example.com');
    expect(config.cdnUrl).to.equal('https://cdn.example.com/icons-here');
    expect(config.passwordReset.url).to.equal('https://app.example.com/reset?token=');
    expect(config.emailChange).to.deep.equal({
      confirmUrl: 'https://app.example.com/confirm?token=',
      revertUrl: 'https://app.example.com/revert?token=',
    });
    // An explicit setting is still checked as before.
    expect(refused({ PUBLIC_URL: 'https://signalboard.example.com', PASSWORD_RESET_URL: 'ftp://x/' })).to.include('PASSWORD_RESET_URL');
    expect(refused({ PUBLIC_URL: 'https://signalboard.example.com', CDN_URL: 'nope' })).to.include('CDN_URL');
  });

  it('with SMTP_URL, stands in for PASSWORD_RESET_URL', () => {
    expect(load({ ...SMTP, PUBLIC_URL: 'https://signalboard.example.com' }).passwordReset).to.deep.equal({
      smtp: { url: SMTP.SMTP_URL, from: SMTP.SMTP_FROM },
      url: 'https://signalboard.example.com/reset-password?token=',
    });
    // SMTP_FROM is still required.
    expect(refused({ SMTP_URL: SMTP.SMTP_URL, PUBLIC_URL: 'https://signalboard.example.com' })).to.include('SMTP_FROM');
  });
});
