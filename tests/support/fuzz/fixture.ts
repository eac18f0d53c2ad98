/**
 * The fixture: real accounts (an owner, a member, an invitee, a stranger), projects, feeds, an
 * insight, an API token and invite codes for the placeholders that generated requests hold. They
 * are resolved at send time, and the fixture is repaired after any case that succeeded in changing
 * something (a deleted project, a renamed feed, a logged-out session), so that the next case points
 * at live objects again. Every password, token and invite code it makes goes to `onSecret`, so that
 * the suite can look for it leaked into the database or the log.
 */
import type { Database } from '../../../server/src/db/orm.js';
import { createInviteCode } from '../../../server/src/domain/invite-codes.js';
import { png } from '../../../tools/src/conformance/png.js';
import { callAt, type Answer } from '../http.js';

export interface FuzzTarget {
  url: string;
  db: Database;
}

interface Account {
  username: string;
  password: string;
  token: string;
}

export class Fixture {
  owner!: Account;
  member!: Account;
  invitee!: Account;
  stranger!: Account;
  apiToken = '';
  apiTokenId = '';
  namespace = '';
  namespace2 = '';
  feed = 'general';
  feed2 = 'second';
  insight = '';
  private invites: string[] = [];
  private readonly tag = Math.random().toString(36).slice(2, 8);
  readonly pngBase64 = png(2, 2).toString('base64');

  constructor(
    private readonly target: FuzzTarget,
    private readonly onSecret: (value: string) => void = () => {},
  ) {}

  private call(method: string, path: string, token?: string, body?: unknown): Promise<Answer> {
    return callAt(this.target.url, method, path, token, body);
  }

  private async must(method: string, path: string, token?: string, body?: unknown): Promise<any> {
    const answer = await this.call(method, path, token, body);
    if (answer.status >= 300) throw new Error(`fuzz fixture: ${method} ${path} answered ${answer.status} ${JSON.stringify(answer.json)}`);
    return answer.json?.data;
  }

  async inviteCode(): Promise<string> {
    const { code } = await createInviteCode(this.target.db.orm.em.fork(), {});
    this.onSecret(code);
    return code;
  }

  private async account(role: string): Promise<Account> {
    const username = `fz-${role}-${this.tag}`;
    const password = `pw-${Math.random().toString(36).slice(2)}-${this.tag}`;
    this.onSecret(password);
    const data = await this.must('POST', '/v1/auth/signup', undefined, {
      username,
      email: `${username}@example.com`,
      password,
      invite: await this.inviteCode(),
    });
    this.onSecret(data.token);
    return { username, password, token: data.token };
  }

  async setUp(): Promise<void> {
    this.owner = await this.account('owner');
    this.member = await this.account('member');
    this.invitee = await this.account('invitee');
    this.stranger = await this.account('stranger');
    this.namespace2 = `fz-other-${this.tag}`;
    await this.must('POST', '/v1/projects', this.stranger.token, { namespace: this.namespace2, name: 'Not yours' });
    for (let i = 0; i < 30; i++) this.invites.push(await this.inviteCode());
    await this.repair();
  }

  /** Takes an invite code from the pool (sign-ups that succeed use them up). */
  nextInvite(): string {
    return this.invites.pop() ?? 'no-invite-left';
  }

  /** Brings every placeholder back to a live object after a case that changed something. */
  async repair(): Promise<void> {
    if ((await this.call('GET', '/v1/users/me', this.owner.token)).status === 401) {
      const data = await this.must('POST', '/v1/auth/login', undefined, { login: this.owner.username, password: this.owner.password });
      this.onSecret(data.token);
      this.owner.token = data.token;
    }
    const token = this.owner.token;
    // A PATCH /v1/users/me that went through renamed the owner: rename it back, since the
    // placeholders and the next login name the owner by its username. Its address changes only
    // when an e-mail change's mailed link is followed, which no case can guess: a request that
    // went through (PATCH takes no `email`; PUT /v1/users/me/email only asks) left it as it was.
    const me = await this.must('GET', '/v1/users/me', token);
    const email = `${this.owner.username}@example.com`;
    if (me.email !== email) throw new Error(`the owner's address changed without a confirmed link: ${String(me.email)}`);
    if (me.username !== this.owner.username) await this.must('PATCH', '/v1/users/me', token, { username: this.owner.username });
    if (!this.apiToken || (await this.call('GET', '/v1/users/me', this.apiToken)).status === 401) {
      const data = await this.must('POST', '/v1/auth/tokens', token, { name: 'fuzz' });
      this.onSecret(data.token);
      this.apiToken = data.token;
      this.apiTokenId = data.id;
    }
    let project = this.namespace ? await this.call('GET', `/v1/projects/${this.namespace}`, token) : { status: 404, json: undefined };
    if (project.status !== 200) {
      const mine = await this.must('GET', '/v1/projects?limit=100', token);
      const owned = (mine.items as { namespace: string; members: { username: string; role: string }[] }[]).find((p) =>
        p.members.some((m) => m.username === this.owner.username && m.role === 'owner'),
      );
      this.namespace = owned?.namespace ?? `fz-${this.tag}-${Date.now().toString(36)}`;
      if (!owned) await this.must('POST', '/v1/projects', token, { namespace: this.namespace, name: 'Fuzz' });
      project = await this.call('GET', `/v1/projects/${this.namespace}`, token);
    }
    const ns = this.namespace;
    const feeds = (await this.must('GET', `/v1/projects/${ns}/feeds?limit=100`, token)).items as { name: string }[];
    while (feeds.length < 2) {
      const name = `f-${feeds.length}-${Date.now().toString(36)}`;
      await this.must('POST', `/v1/projects/${ns}/feeds`, token, { name });
      feeds.push({ name });
    }
    [this.feed, this.feed2] = [feeds[0]!.name, feeds[1]!.name];
    const insights = (await this.must('GET', `/v1/projects/${ns}/insights?limit=1`, token)).items as { id: string }[];
    this.insight = insights[0]?.id ?? (await this.must('POST', `/v1/projects/${ns}/insights`, token, { title: 'signups', value: 1 })).id;
    const members = (project.json?.data?.members ?? []) as { username: string }[];
    if (!members.some((m) => m.username === this.member.username)) {
      await this.call('POST', `/v1/projects/${ns}/invites`, token, { username: this.member.username });
      await this.call('PUT', `/v1/projects/${ns}/invites/${this.member.username}`, this.member.token);
    }
    const pending = (await this.must('GET', `/v1/projects/${ns}/invites?limit=100`, token)).items as {
      user?: { username: string };
      username?: string;
    }[];
    const invited = pending.some((i) => (i.user?.username ?? i.username) === this.invitee.username);
    if (!invited && !members.some((m) => m.username === this.invitee.username)) {
      await this.call('POST', `/v1/projects/${ns}/invites`, token, { username: this.invitee.username });
    }
  }

  /** Placeholders → live values. */
  resolve(text: string): string {
    if (!text.includes('@@')) return text;
    return text.replace(/@@([A-Z0-9_]+)@@/g, (whole, name: string) => {
      switch (name) {
        case 'S':
          return this.owner.token;
        case 'A':
          return this.apiToken;
        case 'NS':
          return this.namespace;
        case 'NS_UPPER':
          return this.namespace.toUpperCase();
        case 'NS2':
          return this.namespace2;
        case 'FEED':
          return this.feed;
        case 'FEED2':
          return this.feed2;
        case 'INSIGHT':
          return this.insight;
        case 'TOKENID':
          return this.apiTokenId;
        case 'OWNER':
          return this.owner.username;
        case 'PASSWORD':
          return this.owner.password;
        case 'MEMBER':
          return this.member.username;
        case 'MEMBER_UPPER':
          return this.member.username.toUpperCase();
        case 'INVITEE':
          return this.invitee.username;
        case 'STRANGER':
          return this.stranger.username;
        case 'INVITE':
          return this.nextInvite();
        case 'PNG':
          return this.pngBase64;
        default:
          return whole;
      }
    });
  }
}
