/**
 * `PUBLIC_URL` on running services: with `SMTP_URL` and without `PASSWORD_RESET_URL`, the service
 * starts, and the mailed reset link is the console's reset page under `PUBLIC_URL`
 * (`/reset-password?token=`, console/src/pages/reset-password.tsx), whose token sets the password;
 * icons are shown under `{PUBLIC_URL}/cdn`, and the service still serves them itself; a bad
 * `PUBLIC_URL` stops the start, naming it; and the first-run line links to the sign-up page under
 * `PUBLIC_URL` rather than the address the service listens on. The settings themselves are in
 * tests/unit/config-public-url.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { ConfigError, loadConfig } from '../../server/src/config.js';
import { startServer, type RunningServer } from '../../server/src/server.js';
import { signUpOn } from '../support/accounts.js';
import { database, freshPostgresDatabase, secret, startExtraServer, type TestServer } from '../support/harness.js';
import { callAt, expectData, type Answer } from '../support/http.js';
import { Mailbox } from '../support/mailbox.js';
import { encodePng } from '../support/png.js';
import { createProject } from '../support/projects.js';

const PUBLIC_URL = 'https://signalboard.example.com/sb';
const FROM = 'Signalboard <noreply@example.com>';
/** Closing the servers started here does not wait out an idle kept-alive connection (see password-reset.test.ts). */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const escape = (text: string) => text.replace(/[.?*+^$()[\]{}|\\/]/g, '\\$&');

describe('PUBLIC_URL', function () {
  this.timeout(120_000);

  describe('with mail and no PASSWORD_RESET_URL', () => {
    let box: Mailbox;
    let server: TestServer;

    before(async () => {
      box = await Mailbox.start();
      // The trailing slash is dropped.
      server = await startExtraServer({
        SMTP_URL: box.url,
        SMTP_FROM: FROM,
        PUBLIC_URL: `${PUBLIC_URL}/`,
        PASSWORD_RESET_URL: '',
        CDN_URL: '',
        ...CLOSES_AT_ONCE,
      });
    });
    after(async () => {
      await server?.close();
      await box?.close();
    });

    it("mails a link to the console's reset page under PUBLIC_URL, whose token sets the password", async () => {
      const user = await signUpOn(server);
      const asked = await callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email: user.email });
      expect(asked.status, asked.text).to.equal(202);
      const [mail] = await box.waitFor(user.email);
      const match = new RegExp(`${escape(`${PUBLIC_URL}/reset-password?token=`)}(\\S+)`).exec(mail!.text);
      expect(match, mail!.text).to.not.equal(null);
      const token = secret(match![1]);
      expect(token).to.match(/^rst_[A-Za-z0-9_-]{43}$/);
      expect(mail!.text).to.not.include(server.url);

      // The page posts the token with the new password: it works.
      const password = secret(`pw-public-url-${process.pid}-${Date.now()}`);
      const confirmed = await callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, { token, new_password: password });
      expect(confirmed.status, confirmed.text).to.equal(204);
      expectData(await callAt(server.url, 'POST', '/v1/auth/login', undefined, { login: user.username, password }), 201);
    });

    it('shows icons under {PUBLIC_URL}/cdn, which the service serves at its own /cdn', async () => {
      const user = await signUpOn(server);
      const png = encodePng({ width: 4, height: 4, bitDepth: 8, colourType: 2, sample: (x, y, c) => (x * 50 + y * 20 + c * 70) % 256 });
      const project = await createProject(user.token, { icon: png.toString('base64') }, server.url);
      const icon = project.icon as string;
      const key = new RegExp(`^${escape(`${PUBLIC_URL}/cdn/icons/`)}([0-9a-f]{64})\\.png$`).exec(icon);
      expect(key, icon).to.not.equal(null);
      const served = await fetch(`${server.url}/cdn/icons/${key![1]}.png`);
      expect(served.status).to.equal(200);
      expect(served.headers.get('content-type')).to.equal('image/png');
    });
  });

  it('a bad one stops the start with a message naming it', async () => {
    for (const bad of ['signalboard.example.com', 'ftp://signalboard.example.com', 'https://signalboard.example.com/?a=1']) {
      let error: unknown;
      await startExtraServer({ PUBLIC_URL: bad, ...CLOSES_AT_ONCE }).then(
        (started) => started.close(),
        (err: unknown) => {
          error = err;
        },
      );
      expect(error, bad).to.be.instanceOf(ConfigError);
      expect((error as Error).message, bad).to.include('PUBLIC_URL');
    }
  });

  describe('the first run', () => {
    interface LogLine {
      level: number;
      msg: string;
    }

    /** As in cookie-sessions.test.ts: a database of its own, logging to `lines` (the line holds a live code). */
    async function start(databaseUrl: string, dataDir: string, lines: LogLine[], env: Record<string, string>): Promise<RunningServer> {
      const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as LogLine) });
      const config = loadConfig({
        ...process.env,
        DATABASE_URL: databaseUrl,
        AUTH_RATE_LIMIT: '0',
        API_RATE_LIMIT: '0',
        ...CLOSES_AT_ONCE,
        ...env,
      });
      return startServer({ ...config, port: 0, host: '127.0.0.1', dataDir }, logger);
    }

    it('links to the sign-up page under PUBLIC_URL, not the address the service listens on', async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-public-url-'));
      const fresh = database().kind === 'postgresql' ? await freshPostgresDatabase(process.env.DATABASE_URL!, 'sb_public_url') : undefined;
      let server: RunningServer | undefined;
      try {
        const lines: LogLine[] = [];
        server = await start(fresh?.url ?? '', dataDir, lines, { PUBLIC_URL });
        const firstRun = lines.filter((line) => line.msg.startsWith('Create the first account'));
        expect(firstRun).to.have.length(1);
        const pattern = new RegExp(`^Create the first account: ${escape(PUBLIC_URL)}/signup\\?invite=(inv_[a-z2-7]{26})$`);
        expect(firstRun[0]!.msg).to.match(pattern);
        expect(firstRun[0]!.level).to.equal(30);

        // The code in it makes the first account on the service itself.
        const code = secret(pattern.exec(firstRun[0]!.msg)![1]);
        const password = secret(`pw-first-public-${process.pid}-${Date.now()}`);
        const signup: Answer = await callAt(server.url, 'POST', '/v1/auth/signup', undefined, {
          username: 'first',
          email: 'first@example.com',
          password,
          invite: code,
        });
        expectData(signup, 201);
      } finally {
        await server?.close();
        await fresh?.drop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });
});
