/**
 * Icons one client can no longer turn into a cost for everyone else:
 * - what is stored is bounded: re-encoded with a real compressor, and refused (400) when even that
 *   is over MAX_ICON_BYTES, so that 256 KiB sent never becomes megabytes stored and served;
 * - one user's icon changes release the icons they made unreferenced, so a loop of changes does not
 *   grow the `icons` table until the hourly prune, while an icon another user shows stays;
 * - `/cdn` answers are counted per client address (CDN_RATE_LIMIT);
 * - the codec's worker is shared fairly: one user's many icons in flight leave room for another's.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import { loadConfig } from '../../server/src/config.js';
import { Unavailable } from '../../server/src/errors.js';
import { MAX_ICON_BYTES } from '../../server/src/storage/icons.js';
import { PngCodec } from '../../server/src/storage/png-codec.js';
import { signUp, signUpOn, type TestUser } from '../support/accounts.js';
import { count, database, sha256, startRateLimitedServer, type TestServer } from '../support/harness.js';
import { call, callAt, expectData, expectInvalid, tally, type Answer } from '../support/http.js';
import { iconRow, rawRequest } from '../support/icons.js';
import { chunk, decodePng, ihdr, png, PNG_SIGNATURE, storedIcon } from '../support/png.js';
import { createProject, namespaceName, projectPath } from '../support/projects.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const DATA_URL = 'data:image/png;base64,';
const ME = '/v1/users/me';
const TOO_BIG = 'icon is larger than 256 KiB once re-encoded; save it with fewer colours or a smaller size';
/** The codec's refusal of a user's icon past that user's share. */
const YOURS = 'You have too many icons being processed; retry shortly.';

/** A PNG of 8-bit scanlines (filter None), each `rowBytes` long and filled by `row(y)`. */
function scanlinePng(width: number, height: number, colourType: number, rowBytes: number, row: (y: number) => Buffer): Buffer {
  const raw = Buffer.alloc((rowBytes + 1) * height);
  for (let y = 0; y < height; y++) row(y).copy(raw, y * (rowBytes + 1) + 1);
  const idat = chunk('IDAT', deflateSync(raw, { level: 9 }));
  return Buffer.concat([PNG_SIGNATURE, chunk('IHDR', ihdr(width, height, 8, colourType)), idat, chunk('IEND', Buffer.alloc(0))]);
}

/** The finding's image: 1024×1024 RGBA whose rows repeat a 16 KiB tile of random bytes (four rows' worth). */
function tiledPng(): Buffer {
  const tile = randomBytes(16 * 1024);
  return scanlinePng(1024, 1024, 6, 4096, (y) => tile.subarray((y % 4) * 4096, (y % 4) * 4096 + 4096));
}

/** Grey noise, side × side: sent as one byte a pixel, stored as RGB, whose three equal bytes deflate barely at all. */
function greyNoisePng(side: number): Buffer {
  return scanlinePng(side, side, 0, side, () => randomBytes(side));
}

/** A small icon no other test sends, and the key the service stores it under. */
function uniqueIcon(): { sent: Buffer; key: string } {
  const sent = scanlinePng(6, 6, 2, 18, () => randomBytes(18));
  return { sent, key: sha256(storedIcon(sent)) };
}

const dataUrl = (bytes: Buffer) => DATA_URL + bytes.toString('base64');

const storedRows = () => count('select count(*)::int from icons');

/** How many of these icons the database still records. */
function recorded(keys: string[]): Promise<number> {
  return count(`select count(*)::int from icons where sha256 in (${keys.map(() => '?').join(', ')})`, keys);
}

describe('icons: bounded cost per client', function () {
  this.timeout(120_000);

  describe('what is stored is bounded', () => {
    it('the finding’s image (46 KB sent, 4 MiB of pixels) is stored re-encoded within 256 KiB, its pixels kept', async () => {
      const user = await signUp();
      const sent = tiledPng();
      expect(sent.length).to.be.at.most(MAX_ICON_BYTES);
      const changed = expectData(await call('PATCH', ME, user.token, { icon: dataUrl(sent) }));
      const key = /([0-9a-f]{64})\.png$/.exec(changed.icon)![1]!;
      const row = await iconRow(key);
      expect(row!.size, 'stored bytes').to.be.at.most(MAX_ICON_BYTES);
      expect(row!.size, 'no amplification: about what was sent').to.be.below(sent.length * 1.25);
      expect(decodePng(row!.bytes!).rgba.equals(decodePng(sent).rgba)).to.equal(true);
    });

    it('refuses with 400 an icon whose re-encoding is over 256 KiB, storing nothing and changing nothing', async () => {
      const user = await signUp();
      const noise = greyNoisePng(500);
      expect(noise.length).to.be.at.most(MAX_ICON_BYTES);
      const before = await storedRows();
      const refused = await call('PATCH', ME, user.token, { icon: dataUrl(noise) });
      expectInvalid(refused, '/body/icon');
      expect(refused.json.error.message).to.equal(TOO_BIG);
      expect(expectData(await call('GET', ME, user.token)).icon).to.equal(null);
      const onCreate = await call('POST', '/v1/projects', user.token, { name: 'Noise', namespace: namespaceName(), icon: dataUrl(noise) });
      expectInvalid(onCreate, '/body/icon');
      expect(await storedRows()).to.equal(before);
    });

    it('still stores an ordinary icon', async () => {
      const user = await signUp();
      const sent = png(48, 48, { color: [12, 120, 240] });
      const changed = expectData(await call('PATCH', ME, user.token, { icon: dataUrl(sent) }));
      const key = sha256(storedIcon(sent));
      expect(changed.icon).to.match(new RegExp(`/cdn/icons/${key}\\.png$`));
      expect((await iconRow(key))!.size).to.be.below(200);
      expect((await fetch(changed.icon)).status).to.equal(200);
    });
  });

  describe('storage per user is bounded', () => {
    it('a user’s successive icon changes leave only the icons still shown, whatever the loop', async () => {
      const user = await signUp();
      const mine = Array.from({ length: 8 }, uniqueIcon);
      for (const icon of mine) expectData(await call('PATCH', ME, user.token, { icon: dataUrl(icon.sent) }));
      expect(await recorded(mine.map((icon) => icon.key))).to.equal(1);
      expect((await iconRow(mine.at(-1)!.key))!.size).to.be.above(0);

      const project = await createProject(user.token, { icon: dataUrl(uniqueIcon().sent) });
      const projectIcons = Array.from({ length: 6 }, uniqueIcon);
      for (const icon of projectIcons) {
        expectData(await call('PATCH', projectPath(project.namespace), user.token, { icon: dataUrl(icon.sent) }));
      }
      expect(await recorded(projectIcons.map((icon) => icon.key))).to.equal(1);

      // Removed, the icon waits for the user's next change (or the prune); that change releases it.
      expectData(await call('PATCH', ME, user.token, { icon: null }));
      expect(await recorded([mine.at(-1)!.key])).to.equal(1);
      const last = uniqueIcon();
      expectData(await call('PATCH', projectPath(project.namespace), user.token, { icon: dataUrl(last.sent) }));
      expect(await recorded([...mine, ...projectIcons].map((icon) => icon.key))).to.equal(0);
      expect(await recorded([last.key])).to.equal(1);
    });

    it('keeps an icon another user shows: content-addressed icons are shared', async () => {
      const [first, second] = [await signUp(), await signUp()];
      const shared = uniqueIcon();
      expectData(await call('PATCH', ME, first.token, { icon: dataUrl(shared.sent) }));
      const shown = expectData(await call('PATCH', ME, second.token, { icon: dataUrl(shared.sent) }));
      expectData(await call('PATCH', ME, first.token, { icon: dataUrl(uniqueIcon().sent) }));
      expect(await recorded([shared.key])).to.equal(1);
      expect((await fetch(shown.icon)).status).to.equal(200);
      // The user who recorded it last releases it once nobody shows it.
      expectData(await call('PATCH', ME, second.token, { icon: dataUrl(uniqueIcon().sent) }));
      expect(await recorded([shared.key])).to.equal(0);
    });

    it('never releases an icon a racing change is making its own, of another user or of the same user', async function () {
      if (database().kind !== 'postgresql') {
        console.log(
          '      (skipped: the embedded database serves one session at a time, so two changes cannot overlap; run with DATABASE_URL)',
        );
        this.skip();
      }
      const [leaving, other] = [await signUp(), await signUp()];
      const [mine, next] = [await createProject(leaving.token), await createProject(leaving.token)];
      const arrivals: [string, (icon: string) => Promise<Answer>][] = [
        ['another user', (icon) => call('PATCH', ME, other.token, { icon })],
        ['another project of the same user', (icon) => call('PATCH', projectPath(next.namespace), leaving.token, { icon })],
      ];
      for (let round = 0; round < 20; round++) {
        for (const [who, arrive] of arrivals) {
          const contested = uniqueIcon();
          expectData(await call('PATCH', projectPath(mine.namespace), leaving.token, { icon: dataUrl(contested.sent) }));
          const [left, arrived] = await Promise.all([
            call('PATCH', projectPath(mine.namespace), leaving.token, { icon: dataUrl(uniqueIcon().sent) }),
            arrive(dataUrl(contested.sent)),
          ]);
          expectData(left);
          const shown = expectData(arrived);
          expect(await recorded([contested.key]), `${who}, round ${round}`).to.equal(1);
          expect((await fetch(shown.icon)).status, `${who}, round ${round}`).to.equal(200);
        }
      }
    });
  });

  describe('/cdn answers per client address (CDN_RATE_LIMIT)', () => {
    let server: TestServer | undefined;
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    async function iconOn(target: TestServer): Promise<{ user: TestUser; path: string }> {
      const user = await signUpOn(target);
      const changed = await callAt(target.url, 'PATCH', ME, user.token, { icon: dataUrl(uniqueIcon().sent) });
      expect(changed.status).to.equal(200);
      return { user, path: new URL(changed.json.data.icon as string).pathname };
    }

    it('allows CDN_RATE_LIMIT requests a minute per address, then 429 in the envelope with Retry-After', async () => {
      server = await startRateLimitedServer({ CDN_RATE_LIMIT: '3', ...CLOSES_AT_ONCE });
      const { user, path } = await iconOn(server);
      const remaining = [];
      for (let i = 0; i < 3; i++) {
        const answer = await rawRequest(server.url, 'GET', path);
        expect(answer.status).to.equal(200);
        expect(answer.headers['ratelimit-limit']).to.equal('3');
        remaining.push(answer.headers['ratelimit-remaining']);
      }
      expect(remaining).to.deep.equal(['2', '1', '0']);
      for (const [method, refusedPath] of [
        ['GET', path],
        ['GET', `/cdn/icons/${sha256(randomBytes(8))}.png`],
        ['GET', '/cdn/anything'],
        ['HEAD', path],
      ] as const) {
        const refused = await rawRequest(server.url, method, refusedPath, { 'If-None-Match': '*' });
        expect(refused.status, `${method} ${refusedPath}`).to.equal(429);
        expect(Number(refused.headers['retry-after'])).to.be.within(1, 60);
        expect([refused.headers['ratelimit-limit'], refused.headers['ratelimit-remaining']]).to.deep.equal(['3', '0']);
        expect(refused.headers['cache-control']).to.equal(undefined);
        if (method === 'GET') {
          expect(JSON.parse(refused.body.toString())).to.deep.equal({
            success: false,
            error: { code: 'rate_limited', message: JSON.parse(refused.body.toString()).error.message },
          });
        }
      }
      // The API counts apart.
      expect((await callAt(server.url, 'GET', ME, user.token)).status).to.equal(200);
    });

    it('counts each client address apart (IPv6 by its /64), behind a trusted proxy', async () => {
      server = await startRateLimitedServer({ CDN_RATE_LIMIT: '1', TRUST_PROXY: '1', ...CLOSES_AT_ONCE });
      const { path } = await iconOn(server);
      const from = async (address: string) => (await rawRequest(server!.url, 'GET', path, { 'X-Forwarded-For': address })).status;
      expect([await from('198.51.100.7'), await from('198.51.100.7')]).to.deep.equal([200, 429]);
      expect(await from('198.51.100.8')).to.equal(200);
      expect([await from('2001:db8:1:2::1'), await from('2001:db8:1:2::ffff')]).to.deep.equal([200, 429]);
    });

    it('is off at 0 (no RateLimit headers), and 1,200 a minute by default', async () => {
      server = await startRateLimitedServer({ CDN_RATE_LIMIT: '0', ...CLOSES_AT_ONCE });
      const { path } = await iconOn(server);
      const answer = await rawRequest(server.url, 'GET', path);
      expect([answer.status, answer.headers['ratelimit-limit']]).to.deep.equal([200, undefined]);
      expect(loadConfig({}).rateLimits.cdn).to.equal(1200);
      expect(() => loadConfig({ CDN_RATE_LIMIT: '-1' })).to.throw('CDN_RATE_LIMIT must be an integer from 0 to 1000000');
    });
  });

  describe('the icon worker, shared fairly between users', () => {
    it('admits another user’s icon while one user has 40 in flight; that user’s excess is 503', async () => {
      const codec = new PngCodec({ timeoutMs: 10_000, maxQueued: 16, maxPerRequester: 2, idleMs: 1_000 });
      const big = tiledPng();
      const greedy = Array.from({ length: 40 }, () => codec.transcode(big, 1024, 'greedy'));
      const settled = Promise.allSettled(greedy);
      const other = await codec.transcode(png(4, 4), 1024, 'other');
      expect(other.ok).to.equal(true);
      const outcomes = await settled;
      expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).to.have.length(2);
      const refusals = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as Error] : []));
      expect(refusals.map((error) => [error instanceof Unavailable, error.message])).to.deep.equal(new Array(38).fill([true, YOURS]));
    });

    it('through the service: one user’s 40 icon updates in flight, another user’s update is 200', async () => {
      const [greedy, other] = [await signUp(), await signUp()];
      const big = dataUrl(tiledPng());
      let firstRefusal: () => void = () => {};
      const refused = new Promise<void>((resolve) => (firstRefusal = resolve));
      const flood: Promise<Answer>[] = Array.from({ length: 40 }, () =>
        call('PATCH', ME, greedy.token, { icon: big }).then((answer) => {
          if (answer.status === 503) firstRefusal();
          return answer;
        }),
      );
      await refused;
      const own = await call('PATCH', ME, other.token, { icon: dataUrl(uniqueIcon().sent) });
      expect(own.status, own.text).to.equal(200);
      const answers = await Promise.all(flood);
      const statuses = tally(answers.map((answer) => answer.status));
      expect(Object.keys(statuses).sort()).to.deep.equal(['200', '503']);
      for (const answer of answers.filter((each) => each.status === 503)) {
        expect(answer.json.error).to.deep.equal({ code: 'unavailable', message: YOURS });
      }
    });
  });
});
