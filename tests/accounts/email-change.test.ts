/**
 * Changing the e-mail address: `PUT /v1/users/me/email` (session and password, 202 whatever the
 * address), `POST /v1/auth/email-confirm` (the link mailed to the new address makes the change and
 * tells the old one) and `POST /v1/auth/email-revert` (the old address's link undoes it and ends
 * every session). The mail goes to a real SMTP server started here; the links in it are what the
 * tests follow. Also: what a password change, a reset and a change of address void; the old
 * address kept for the undo while its link lives, against sign-ups and other accounts' changes,
 * racing ones included; and the operator's `email-link` command for deployments without mail.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { baseUrl, count, database, outputDir, secret, sha256, sql, startExtraServer, type TestServer } from '../support/harness.js';
import { inviteCode, signUp, signUpOn, uniqueName, type TestUser } from '../support/accounts.js';
import { Mailbox, type Mail } from '../support/mailbox.js';
import { callAt, expectData, expectError, expectInvalid, expectNoContent, tally, type Answer } from '../support/http.js';
import { npmRunUser } from '../support/service-process.js';

/**
 * For the servers this file starts besides the run's: a keep-alive timeout the tests' fetch does not
 * reuse connections under (undici keeps one only when the server's `Keep-Alive: timeout` exceeds its
 * threshold of a second or two), so that closing a server does not wait out an idle kept-alive
 * connection (about 3 s at the default 5 s). The keep-alive is not what these tests are about.
 */
const CLOSES_AT_ONCE = { HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' };

const CONFIRM_URL = 'https://app.example.com/email-confirm?token=';
const REVERT_URL = 'https://app.example.com/email-revert?token=';
const RESET_URL = 'https://app.example.com/reset?token=';
const FROM = 'Signalboard <noreply@example.com>';
const REQUESTED = {
  success: true,
  data: { message: 'A link to confirm the change is on its way to the new address; the address changes when it is followed.' },
};

/** The token after `page` in `mail`, registered as a secret and held to its form. */
function tokenAfter(page: string, mail: Mail, prefix: string): string {
  const escaped = page.replace(/[.?*+^$()[\]{}|\\/]/g, '\\$&');
  const match = new RegExp(`${escaped}(\\S+)`).exec(mail.text);
  expect(match, mail.text).to.not.equal(null);
  const token = secret(match![1]);
  expect(token).to.match(new RegExp(`^${prefix}[A-Za-z0-9_-]{43}$`));
  return token;
}

describe('e-mail change', function () {
  this.timeout(120_000);
  let box: Mailbox;
  let server: TestServer;

  before(async () => {
    box = await Mailbox.start();
    server = await startExtraServer({
      SMTP_URL: box.url,
      SMTP_FROM: FROM,
      PASSWORD_RESET_URL: RESET_URL,
      EMAIL_CONFIRM_URL: CONFIRM_URL,
      EMAIL_REVERT_URL: REVERT_URL,
      ...CLOSES_AT_ONCE,
    });
  });
  after(async () => {
    await server.close();
    await box.close();
  });

  const ask = (token: string, email: string, currentPassword: string) =>
    callAt(server.url, 'PUT', '/v1/users/me/email', token, { email, current_password: currentPassword });
  const confirm = (token: string) => callAt(server.url, 'POST', '/v1/auth/email-confirm', undefined, { token });
  const revert = (token: string) => callAt(server.url, 'POST', '/v1/auth/email-revert', undefined, { token });
  const login = (login: string, password: string) => callAt(server.url, 'POST', '/v1/auth/login', undefined, { login, password });
  const emailOf = async (user: TestUser) =>
    (await sql<{ email: string }>('select email from users where id = ?', [user.id], server.db))[0]!.email;
  const pendingChanges = (user: TestUser) => count('select count(*)::int from email_changes where user_id = ?', [user.id], server.db);
  const sessions = (user: TestUser) => count('select count(*)::int from sessions where user_id = ?', [user.id], server.db);

  const expectResetAsked = (answer: Answer) => expect(answer.status, answer.text).to.equal(202);

  function expectRequested(answer: Answer): void {
    expect(answer.status, answer.text).to.equal(202);
    expect(answer.json).to.deep.equal(REQUESTED);
  }

  /** Asks for the change and answers the token of the link mailed to `email`. */
  async function confirmToken(user: TestUser, email: string, password = user.password): Promise<string> {
    const before = box.mails.filter((m) => m.to.includes(email)).length;
    expectRequested(await ask(user.token, email, password));
    return tokenAfter(CONFIRM_URL, (await box.waitFor(email, before + 1)).at(-1)!, 'emc_');
  }

  /** Makes the change to `email` and answers the token of the undo link mailed to the address it replaced. */
  async function changeTo(user: TestUser, email: string): Promise<string> {
    const old = await emailOf(user);
    const before = box.mails.filter((m) => m.to.includes(old)).length;
    expectNoContent(await confirm(await confirmToken(user, email)));
    const notice = (await box.waitFor(old, before + 1)).at(-1)!;
    expect(notice.subject).to.equal('Your Signalboard e-mail address was changed');
    expect(notice.text).to.include(email);
    return tokenAfter(REVERT_URL, notice, 'emr_');
  }

  it('with the password: 202, nothing changes until the link mailed to the new address is followed; then the old address is told', async () => {
    const user = await signUpOn(server);
    const email = `${uniqueName('new')}@example.com`;
    const token = await confirmToken(user, email);
    const mail = box.mails.filter((m) => m.to.includes(email)).at(-1)!;
    expect(mail.from.address).to.equal('noreply@example.com');
    expect(mail.subject).to.equal('Confirm your new Signalboard e-mail address');
    expect(mail.text).to.include(user.username);
    expect(await emailOf(user)).to.equal(user.email);
    expect(expectData(await callAt(server.url, 'GET', '/v1/users/me', user.token)).email).to.equal(user.email);

    expectNoContent(await confirm(token));
    expect(await emailOf(user)).to.equal(email);
    expect(await pendingChanges(user)).to.equal(0);
    expect(expectData(await callAt(server.url, 'GET', '/v1/users/me', user.token)).email).to.equal(email);
    const notice = (await box.waitFor(user.email)).at(-1)!;
    expect(notice.text).to.include(email);
    tokenAfter(REVERT_URL, notice, 'emr_');
    // The new address signs in; the old one no longer does. Sessions go on.
    expectData(await login(email, user.password), 201);
    expectError(await login(user.email, user.password), 401, 'invalid_credentials');
    expect(await sessions(user)).to.equal(2);
    // The link works once.
    expectError(await confirm(token), 400, 'invalid_email_token');
  });

  it('an API token cannot ask for it (403 session_required), nor a wrong or missing password (401, 400); nothing is stored or sent', async () => {
    const user = await signUpOn(server);
    const email = `${uniqueName('never')}@example.com`;
    const made = await callAt(server.url, 'POST', '/v1/auth/tokens', user.token, { name: 'a script' });
    const token = secret((expectData(made, 201) as { token: string }).token);
    expectError(await ask(token, email, user.password), 403, 'session_required');
    expectError(await ask(user.token, email, 'not the password'), 401, 'invalid_credentials');
    expectInvalid(await callAt(server.url, 'PUT', '/v1/users/me/email', user.token, { email }), '/body/current_password');
    expectInvalid(await ask(user.token, 'not an address', user.password), '/body/email');
    expectError(
      await callAt(server.url, 'PUT', '/v1/users/me/email', undefined, { email, current_password: user.password }),
      401,
      'unauthenticated',
    );
    expect(await pendingChanges(user)).to.equal(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(box.mails.filter((m) => m.to.includes(email))).to.have.length(0);
    expect(await emailOf(user)).to.equal(user.email);
  });

  it('PATCH /v1/users/me no longer takes an e-mail address (400), for sessions and API tokens alike', async () => {
    const user = await signUpOn(server);
    expectInvalid(await callAt(server.url, 'PATCH', '/v1/users/me', user.token, { email: `${uniqueName()}@example.com` }), '/body/email');
    expect(await emailOf(user)).to.equal(user.email);
  });

  it('answers a taken address exactly as a free one; the confirmation then refuses it with 409, changing nothing', async () => {
    const [user, other] = await Promise.all([signUpOn(server), signUpOn(server)]);
    const free = await ask(user.token, `${uniqueName('free')}@example.com`, user.password);
    const taken = await ask(user.token, other.email.toUpperCase(), user.password);
    expectRequested(free);
    expectRequested(taken);
    expect(taken.text).to.equal(free.text);
    const token = tokenAfter(CONFIRM_URL, (await box.waitFor(other.email.toUpperCase())).at(-1)!, 'emc_');
    expectError(await confirm(token), 409, 'email_taken');
    expect(await emailOf(user)).to.equal(user.email);
    expect(await emailOf(other)).to.equal(other.email);
  });

  it('a new request replaces the pending one: its link is refused, the new one works', async () => {
    const user = await signUpOn(server);
    const first = await confirmToken(user, `${uniqueName('first')}@example.com`);
    const secondEmail = `${uniqueName('second')}@example.com`;
    const second = await confirmToken(user, secondEmail);
    expect(await pendingChanges(user)).to.equal(1);
    expectError(await confirm(first), 400, 'invalid_email_token');
    expectNoContent(await confirm(second));
    expect(await emailOf(user)).to.equal(secondEmail);
  });

  it('refuses an expired link, and an unknown or malformed token', async () => {
    const user = await signUpOn(server);
    const token = await confirmToken(user, `${uniqueName('late')}@example.com`);
    await sql(`update email_changes set expires_at = now() - interval '1 second' where user_id = ?`, [user.id], server.db);
    expectError(await confirm(token), 400, 'invalid_email_token');
    expect(await emailOf(user)).to.equal(user.email);
    expectError(await confirm(`emc_${'A'.repeat(43)}`), 400, 'invalid_email_token');
    expectError(await revert(`emr_${'A'.repeat(43)}`), 400, 'invalid_email_token');
    expectInvalid(await confirm('no such token!'), '/body/token');
    expectInvalid(await callAt(server.url, 'POST', '/v1/auth/email-revert', undefined, {}), '/body/token');
  });

  it('of racing confirmations of one link, exactly one succeeds', async () => {
    const user = await signUpOn(server);
    const email = `${uniqueName('race')}@example.com`;
    const token = await confirmToken(user, email);
    const answers = await Promise.all(Array.from({ length: 6 }, () => confirm(token)));
    expect(tally(answers.map((a) => a.status))).to.deep.equal({ 204: 1, 400: 5 });
    expect(await count('select count(*)::int from email_reverts where user_id = ?', [user.id], server.db)).to.equal(1);
  });

  it("the old address's link undoes the change: the address comes back, every session ends, reset links and pending changes are void", async () => {
    const user = await signUpOn(server);
    const taker = `${uniqueName('taker')}@example.com`;
    const undo = await changeTo(user, taker);
    // What the one who changed it does next: a reset link to the new address, another change.
    expectResetAsked(await callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email: taker }));
    const resetToken = tokenAfter(RESET_URL, (await box.waitFor(taker, 2)).at(-1)!, 'rst_');
    const pending = await confirmToken(user, `${uniqueName('next')}@example.com`);

    expectNoContent(await revert(undo));
    expect(await emailOf(user)).to.equal(user.email);
    expect(await sessions(user)).to.equal(0);
    expectError(await callAt(server.url, 'GET', '/v1/users/me', user.token), 401, 'unauthenticated');
    expectError(await confirm(pending), 400, 'invalid_email_token');
    const reset = await callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, {
      token: resetToken,
      new_password: 'the taker wants this',
    });
    expectError(reset, 400, 'invalid_reset_token');
    expectData(await login(user.email, user.password), 201);
    // Once.
    expectError(await revert(undo), 400, 'invalid_email_token');
  });

  it('confirming a change voids the reset link made before it', async () => {
    const user = await signUpOn(server);
    expectResetAsked(await callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email: user.email }));
    const resetToken = tokenAfter(RESET_URL, (await box.waitFor(user.email)).at(-1)!, 'rst_');
    await changeTo(user, `${uniqueName('moved')}@example.com`);
    const reset = await callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, {
      token: resetToken,
      new_password: 'from the old mailbox',
    });
    expectError(reset, 400, 'invalid_reset_token');
    expectData(await login(user.username, user.password), 201);
  });

  it('a password change voids the pending change and the reset link', async () => {
    const user = await signUpOn(server);
    const pending = await confirmToken(user, `${uniqueName('pending')}@example.com`);
    expectResetAsked(await callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email: user.email }));
    const resetToken = tokenAfter(RESET_URL, (await box.waitFor(user.email)).at(-1)!, 'rst_');
    const password = secret('a brand new password');
    expectNoContent(
      await callAt(server.url, 'PUT', '/v1/users/me/password', user.token, { current_password: user.password, new_password: password }),
    );
    expectError(await confirm(pending), 400, 'invalid_email_token');
    const reset = await callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, {
      token: resetToken,
      new_password: 'reset after the change',
    });
    expectError(reset, 400, 'invalid_reset_token');
    expect(await emailOf(user)).to.equal(user.email);
    expectData(await login(user.username, password), 201);
  });

  it('a password reset voids the pending change', async () => {
    const user = await signUpOn(server);
    const pending = await confirmToken(user, `${uniqueName('pending')}@example.com`);
    expectResetAsked(await callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email: user.email }));
    const resetToken = tokenAfter(RESET_URL, (await box.waitFor(user.email)).at(-1)!, 'rst_');
    expectNoContent(
      await callAt(server.url, 'POST', '/v1/auth/password-reset/confirm', undefined, {
        token: resetToken,
        new_password: secret('reset it'),
      }),
    );
    expectError(await confirm(pending), 400, 'invalid_email_token');
    expect(await pendingChanges(user)).to.equal(0);
  });

  it('keeps at most 10 live undo links per user, keeping the oldest', async () => {
    const user = await signUpOn(server);
    const first = await changeTo(user, `${uniqueName('c0')}@example.com`);
    for (let i = 1; i <= 11; i++) {
      const email = `${uniqueName(`c${i}`)}@example.com`;
      expectNoContent(await confirm(await confirmToken(user, email)));
    }
    expect(await count('select count(*)::int from email_reverts where user_id = ?', [user.id], server.db)).to.equal(10);
    expectNoContent(await revert(first));
    expect(await emailOf(user)).to.equal(user.email);
  });

  /** A sign-up on the test's server with `email`, and the invite code it was given. */
  async function signUpWith(email: string): Promise<{ answer: Answer; username: string; invite: string }> {
    const username = uniqueName('squat');
    const invite = await inviteCode({}, server.db);
    const answer = await callAt(server.url, 'POST', '/v1/auth/signup', undefined, {
      username,
      email,
      password: secret(`pw-${username}`),
      invite,
    });
    return { answer, username, invite };
  }
  const accountsWithEmail = (email: string) => count('select count(*)::int from users where lower(email) = lower(?)', [email], server.db);
  const usersNamed = (username: string) => count('select count(*)::int from users where username = ?', [username], server.db);
  const inviteUsesLeft = async (code: string) =>
    (await sql<{ uses_left: number }>('select uses_left from invite_codes where code_hash = ?', [sha256(code)], server.db))[0]!.uses_left;

  /** A refused sign-up: 409 email_taken as for a taken address, no account made, the invite's use given back. */
  async function expectSignUpRefused(email: string): Promise<void> {
    const { answer, username, invite } = await signUpWith(email);
    expectError(answer, 409, 'email_taken', email);
    expect(answer.json.error.message).to.equal('An account with this email address exists.');
    expect(await usersNamed(username), 'no account made').to.equal(0);
    expect(await inviteUsesLeft(invite), "the invite's use given back").to.equal(1);
  }

  it('while its undo link lives, the old address is kept for the undo: sign-ups and changes to it are refused as for a taken address, in any case', async () => {
    const [victim, other] = await Promise.all([signUpOn(server, { email: `${uniqueName('Victim')}@Example.com` }), signUpOn(server)]);
    const undo = await changeTo(victim, `${uniqueName('attacker')}@example.com`);
    expect(await accountsWithEmail(victim.email), 'nobody has the old address now').to.equal(0);

    for (const email of [victim.email, victim.email.toLowerCase(), victim.email.toUpperCase()]) await expectSignUpRefused(email);
    // Another account's change to it: asked for as any other (202, the same words), refused at the confirmation.
    const mailsBefore = (await box.waitFor(victim.email)).length; // the mailbox matches addresses without regard to case
    expectRequested(await ask(other.token, victim.email.toLowerCase(), other.password));
    const token = tokenAfter(CONFIRM_URL, (await box.waitFor(victim.email, mailsBefore + 1)).at(-1)!, 'emc_');
    expectError(await confirm(token), 409, 'email_taken');
    expect(await emailOf(other)).to.equal(other.email);
    expect(await pendingChanges(other), 'the refused change stays pending').to.equal(1);
    expect(await accountsWithEmail(victim.email)).to.equal(0);

    expectNoContent(await revert(undo));
    expect(await emailOf(victim)).to.equal(victim.email);
    expect(await accountsWithEmail(victim.email)).to.equal(1);
    expect(
      await count('select count(*)::int from email_reverts where user_id = ? and used_at is not null', [victim.id], server.db),
    ).to.equal(1);
    await expectSignUpRefused(victim.email.toLowerCase()); // taken again, by its owner
  });

  it('an expired undo link keeps nothing; the account the link restores may take its old address back itself', async () => {
    const user = await signUpOn(server);
    await changeTo(user, `${uniqueName('away')}@example.com`);
    // Its own change back to the old address is no taking: the undo link would restore the same.
    const mailsBefore = (await box.waitFor(user.email)).length; // the mailbox matches addresses without regard to case
    expectRequested(await ask(user.token, user.email.toUpperCase(), user.password));
    const back = tokenAfter(CONFIRM_URL, (await box.waitFor(user.email, mailsBefore + 1)).at(-1)!, 'emc_');
    expectNoContent(await confirm(back));
    expect(await emailOf(user)).to.equal(user.email.toUpperCase());

    const left = await signUpOn(server);
    await changeTo(left, `${uniqueName('gone')}@example.com`);
    await expectSignUpRefused(left.email);
    await sql(`update email_reverts set expires_at = now() - interval '1 second' where user_id = ?`, [left.id], server.db);
    const { answer, username } = await signUpWith(left.email);
    expectData(answer, 201);
    expect(await usersNamed(username)).to.equal(1);
    expect(await accountsWithEmail(left.email)).to.equal(1);
  });

  it('the undo wins against a sign-up racing the confirmation that frees the address (PostgreSQL)', async function () {
    // The embedded database runs one transaction at a time: nothing races there.
    if (server.db.kind !== 'postgresql') this.skip();
    const victim = await signUpOn(server);
    const confirmToTaker = await confirmToken(victim, `${uniqueName('taker')}@example.com`);
    // A reset link gives the confirmation a row to wait on once it has changed the address, before it commits.
    expectResetAsked(await callAt(server.url, 'POST', '/v1/auth/password-reset', undefined, { email: victim.email }));
    await box.waitFor(victim.email);
    const blocker = new pg.Client({ connectionString: server.db.orm.config.get('clientUrl') });
    await blocker.connect();
    let confirmed: Promise<Answer> | undefined;
    let squatter: Promise<{ answer: Answer; username: string; invite: string }> | undefined;
    try {
      await blocker.query('begin');
      await blocker.query('select 1 from password_reset_tokens where user_id = $1 for update', [victim.id]);
      confirmed = confirm(confirmToTaker);
      await waitFor('the confirmation to wait, its change made', () => waitingOn('%password_reset_tokens%'));
      // The sign-up reaches the users table while the address is free in the confirmation's uncommitted change.
      squatter = signUpWith(victim.email);
      await waitFor('the sign-up to wait', () => waitingOn('%into "users"%'));
    } finally {
      await blocker.query('rollback').catch(() => {});
      await blocker.end();
    }
    expectNoContent(await confirmed);
    const { answer, username, invite } = await squatter;
    expectError(answer, 409, 'email_taken');
    expect(await usersNamed(username)).to.equal(0);
    expect(await inviteUsesLeft(invite)).to.equal(1);
    const undo = tokenAfter(REVERT_URL, (await box.waitFor(victim.email, 2)).at(-1)!, 'emr_');
    expectNoContent(await revert(undo));
    expect(await emailOf(victim)).to.equal(victim.email);
    expect(await accountsWithEmail(victim.email)).to.equal(1);
  });

  /** Polls `condition` every 10 ms until it holds, failing after `timeoutMs`. */
  async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** Whether a backend of the test server's database waits for a lock in a statement matching `pattern` (ILIKE). */
  const waitingOn = async (pattern: string) =>
    (await count(
      `select count(*)::int from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike ?`,
      [pattern],
      server.db,
    )) > 0;

  it('no token, no address and no password reaches a log line', async () => {
    // The run's end checks every table and the log for registered secrets; here, the addresses.
    const user = await signUpOn(server);
    const email = `${uniqueName('logged')}@example.com`;
    await changeTo(user, email);
    const log = readFileSync(path.join(outputDir, 'server.log'), 'utf8');
    expect(log).to.not.include(email);
  });
});

describe('e-mail change without mail: the operator prints the link', function () {
  this.timeout(120_000);

  it('`npm run user -- email-link <username>` prints a working link for the pending change; none pending: exit 1', async function () {
    // The run's own server has no mail, and with PostgreSQL the command reaches its database directly.
    if (database().kind !== 'postgresql') this.skip(); // embedded: the operator channel is tested in password-reset.test.ts
    const user = await signUp();
    const email = `${uniqueName('operator')}@example.com`;
    const env = { ...process.env, DATABASE_URL: database().orm.config.get('clientUrl'), EMAIL_CONFIRM_URL: CONFIRM_URL };
    const none = await npmRunUser(env, ['email-link', user.username]);
    expect(none.code, none.stderr).to.equal(1);
    expect(none.stderr).to.include('no pending e-mail change');
    expect((await callAt(baseUrl(), 'PUT', '/v1/users/me/email', user.token, { email, current_password: user.password })).status).to.equal(
      202,
    );
    const made = await npmRunUser(env, ['email-link', user.username.toUpperCase()]);
    expect(made.code, made.stderr).to.equal(0);
    const link = made.stdout.trimEnd().split('\n').at(-1)!;
    expect(link.startsWith(CONFIRM_URL), made.stdout).to.equal(true);
    expectNoContent(
      await callAt(baseUrl(), 'POST', '/v1/auth/email-confirm', undefined, { token: secret(link.slice(CONFIRM_URL.length)) }),
    );
    expect(expectData(await callAt(baseUrl(), 'GET', '/v1/users/me', user.token)).email).to.equal(email);
  });
});
