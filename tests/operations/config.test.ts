/**
 * Settings from the environment: EVENT_RETENTION_DAYS, a whole number of days from 0 (keep events
 * forever) to 36,500, 90 when unset; ICON_STORE (the database by default, or an S3-compatible bucket
 * with its S3_* settings); anything else stops the start with a ConfigError naming it, which never
 * shows the bucket's secret key. The last part starts the service itself with a bad setting.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { ConfigError, loadConfig } from '../../server/src/config.js';
import { repositoryRoot } from '../support/service-process.js';

const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';

/** The settings of a bucket on a self-hosted S3-compatible service. */
const S3 = {
  ICON_STORE: 's3',
  S3_BUCKET: 'signalboard-icons',
  S3_ENDPOINT: 'http://minio.internal:9000/',
  S3_REGION: 'eu-west-3',
  S3_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
  S3_SECRET_ACCESS_KEY: SECRET,
  S3_FORCE_PATH_STYLE: 'true',
};

/** The ConfigError `env` stops the start with; it never shows the secret key. */
function refusal(env: NodeJS.ProcessEnv): string {
  let thrown: unknown;
  try {
    loadConfig(env);
  } catch (error) {
    thrown = error;
  }
  expect(thrown, Object.keys(env).join(', ')).to.be.instanceOf(ConfigError);
  const { message } = thrown as ConfigError;
  expect(message).to.not.include(SECRET);
  return message;
}

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

  describe('ICON_STORE and the S3 settings', () => {
    it('keeps icons in the database when unset or empty, or set to database', () => {
      for (const env of [{}, { ICON_STORE: '' }, { ICON_STORE: 'database' }]) {
        expect(loadConfig(env).icons, JSON.stringify(env)).to.deep.equal({ store: 'database' });
      }
    });

    it('takes a bucket with its endpoint, region, keys, addressing and bound', () => {
      expect(loadConfig(S3).icons).to.deep.equal({
        store: 's3',
        s3: {
          bucket: 'signalboard-icons',
          endpoint: 'http://minio.internal:9000',
          region: 'eu-west-3',
          credentials: { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: SECRET },
          forcePathStyle: true,
          timeoutMs: 5_000,
        },
      });
    });

    it('needs only a bucket: AWS itself in us-east-1, virtual-hosted addressing, the SDK’s own credentials', () => {
      expect(loadConfig({ ICON_STORE: 's3', S3_BUCKET: 'icons' }).icons).to.deep.equal({
        store: 's3',
        s3: { bucket: 'icons', endpoint: undefined, region: 'us-east-1', credentials: undefined, forcePathStyle: false, timeoutMs: 5_000 },
      });
      const bounded = loadConfig({ ICON_STORE: 's3', S3_BUCKET: 'icons', S3_TIMEOUT_MS: '250', S3_FORCE_PATH_STYLE: '0' }).icons;
      expect(bounded).to.deep.include({ store: 's3' });
      expect(bounded.store === 's3' && [bounded.s3.timeoutMs, bounded.s3.forcePathStyle]).to.deep.equal([250, false]);
    });

    it('refuses s3 without a bucket, and a store it does not know', () => {
      for (const env of [{ ICON_STORE: 's3' }, { ...S3, S3_BUCKET: '' }]) {
        expect(refusal(env)).to.equal('ICON_STORE=s3 needs S3_BUCKET, the bucket to keep icons in');
      }
      for (const store of ['disk', 'S3', 'minio', 'files']) {
        expect(refusal({ ICON_STORE: store })).to.equal(`ICON_STORE must be database or s3, got "${store}"`);
      }
    });

    it('refuses one key without the other, naming them and never showing the secret', () => {
      const message = "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither for the AWS SDK's own credentials";
      expect(refusal({ ...S3, S3_ACCESS_KEY_ID: '' })).to.equal(message);
      expect(refusal({ ...S3, S3_SECRET_ACCESS_KEY: '' })).to.equal(message);
    });

    it('refuses S3 settings while icons go to the database, naming them', () => {
      const { ICON_STORE: _store, ...settings } = S3;
      expect(refusal(settings)).to.equal(
        'S3_BUCKET, S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_FORCE_PATH_STYLE set, but ICON_STORE is not s3: ' +
          'set ICON_STORE=s3, or unset them',
      );
      expect(refusal({ ICON_STORE: 'database', S3_SECRET_ACCESS_KEY: SECRET })).to.equal(
        'S3_SECRET_ACCESS_KEY set, but ICON_STORE is not s3: set ICON_STORE=s3, or unset them',
      );
    });

    it('refuses a bad endpoint, bucket name, addressing or bound, naming the setting', () => {
      const cases: [Record<string, string>, string][] = [
        [{ S3_ENDPOINT: 'http://' }, 'S3_ENDPOINT is not a valid URL'],
        [{ S3_ENDPOINT: 'minio.internal:9000' }, 'S3_ENDPOINT must be an http or https URL'],
        [{ S3_BUCKET: 'icons/sub' }, 'S3_BUCKET must be a bucket name (letters, digits, ".", "-", "_"), got "icons/sub"'],
        [{ S3_BUCKET: '-icons' }, 'S3_BUCKET must be a bucket name (letters, digits, ".", "-", "_"), got "-icons"'],
        [{ S3_FORCE_PATH_STYLE: 'yes' }, 'S3_FORCE_PATH_STYLE must be true or false, got "yes"'],
        [{ S3_TIMEOUT_MS: '99' }, 'S3_TIMEOUT_MS must be an integer from 100 to 600000, got "99"'],
        [{ S3_TIMEOUT_MS: '5s' }, 'S3_TIMEOUT_MS must be an integer from 100 to 600000, got "5s"'],
      ];
      for (const [change, message] of cases) expect(refusal({ ...S3, ...change })).to.equal(message);
    });

    it('stops the service before it listens: exit 1 and the message on standard error, without the secret', async function () {
      this.timeout(60_000);
      const start = (env: Record<string, string>) =>
        new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
          const argv = ['--import', 'tsx', 'server/src/main.ts'];
          const { DATABASE_URL: _database, ...inherited } = process.env;
          execFile(
            process.execPath,
            argv,
            { cwd: repositoryRoot, env: { ...inherited, PORT: '0', ...env }, timeout: 30_000 },
            (error, stdout, stderr) => resolve({ code: error ? (error.code as number) : 0, stdout, stderr }),
          );
        });
      const noBucket = await start({ ICON_STORE: 's3', S3_SECRET_ACCESS_KEY: SECRET, S3_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE' });
      expect(noBucket.code).to.equal(1);
      expect(noBucket.stderr.trim()).to.equal('Configuration error: ICON_STORE=s3 needs S3_BUCKET, the bucket to keep icons in');
      expect(noBucket.stdout).to.equal('');
      const halfKeys = await start({ ...S3, S3_ACCESS_KEY_ID: '' });
      expect(halfKeys.code).to.equal(1);
      expect(halfKeys.stderr).to.include('Configuration error: S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together');
      expect(halfKeys.stderr + halfKeys.stdout).to.not.include(SECRET);
    });
  });
});
