/**
 * What a conformance case is, and the context it runs in: the client (every answer judged against
 * the contract), the state earlier cases left (accounts, tokens, projects), and the ledger of what
 * the run created, which the clean-up at the end undoes whatever happened in between.
 */
import { randomBytes } from 'node:crypto';
import type { ContractModel } from './contract.js';
import type { Client, Exchange, Request, StreamExchange } from './http.js';

/** Invite uses a run spends: two accounts, an owner and a second user (outsider, invitee, then member). */
export const INVITE_USES = 2;

export interface RunOptions {
  baseUrl: string;
  inviteCode: string;
  /** Provoke 429 on every operation (spends a throwaway credential's limit and this address's sign-up/login limit). */
  rateLimits: boolean;
  /** The deployment's STRIPE_WEBHOOK_SECRET, to send signed webhook events. */
  stripeWebhookSecret: string | undefined;
}

export interface Account {
  username: string;
  email: string;
  password: string;
  id?: string;
  session?: string;
}

/** What cases hand on to later cases. */
export interface State {
  /** Unique to the run: every name the run creates starts with it. */
  tag: string;
  a: Account;
  b: Account;
  /** A's second session, from login. */
  a2?: string;
  /** A's session from a login with `cookie: true`: the session cookie's value. */
  aCookie?: string;
  /** A's API token. */
  apiToken?: { id: string; token: string };
  /** A's narrowed API tokens, both limited to P1: one that may only publish, one that may only read. */
  publishToken?: { id: string; token: string };
  readToken?: { id: string; token: string };
  /** Current namespaces of the run's two projects. */
  p1?: string;
  p2?: string;
  insightNumber?: string;
  insightString?: string;
  events: { id: string; feed: string }[];
  /** Whether the webhook checks signatures (true) or answers 503 because billing is off (false). */
  billingOn?: boolean;
  /** Operations the deployment does not rate-limit (answered otherwise to a spent credential). */
  notLimited: Map<string, number>;
  /** Whether checkout and the billing portal are configured (false: they answer 503); undefined until a case found out. */
  checkoutOn?: boolean;
  portalOn?: boolean;
  /** The namespace of project H, which A hands over to B before both accounts are deleted. */
  handedOver?: string;
  /** Webhook endpoint W of P1 (checks/webhooks.ts), and a delivery of it. */
  webhook?: string;
  delivery?: string;
  /** The deployment let P1 have more webhook endpoints than the contract's 10: its 409 `limit_reached` was not provoked. */
  webhookCapUnreached?: boolean;
}

/** What the run created and has not yet removed; the clean-up works from it. */
export class Ledger {
  /** namespace → session token of its owner. */
  readonly projects = new Map<string, string>();
  /** API token id → session token that made it. */
  readonly tokens = new Map<string, string>();
  /** session token → whose (for the report; the token itself is never written). */
  readonly sessions = new Map<string, string>();
  readonly accounts: string[] = [];

  renamed(from: string, to: string): void {
    const owner = this.projects.get(from);
    if (owner === undefined) return;
    this.projects.delete(from);
    this.projects.set(to, owner);
  }
}

export interface CaseDef {
  /** The resource the case belongs to (the report groups by it). */
  group: string;
  /** The operation it exercises, as `METHOD /template` of the contract. */
  op: string;
  /** What it expects, e.g. `201` or `409 namespace_taken`. */
  expect: string;
  title: string;
  run: (t: CaseContext) => Promise<void>;
  /** A request no operation has (unknown path, wrong method): the operation is not looked up. */
  offContract?: boolean;
}

/** A behaviour the contract describes did not happen. */
export class Mismatch extends Error {
  constructor(
    message: string,
    readonly exchange?: Exchange,
  ) {
    super(message);
  }
}

/** An earlier case did not produce what this one needs. */
export class Blocked extends Error {}

export function randomToken(prefix = 'ses_'): string {
  return prefix + randomBytes(32).toString('base64url');
}

/** A UUID v7 that no deployment has issued (random bits, current time). */
export function unknownUuid(): string {
  const bytes = randomBytes(16);
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function excerpt(exchange: Exchange): string {
  const code = exchange.json?.error?.code;
  const body = exchange.text === undefined ? '(stream)' : exchange.text.length > 300 ? `${exchange.text.slice(0, 300)}…` : exchange.text;
  return `${exchange.status}${typeof code === 'string' ? ` ${code}` : ''}: ${body || '(empty)'}`;
}

export class CaseContext {
  /** Notes for the report (e.g. "not rate-limited by this deployment"). */
  readonly notes: string[] = [];

  constructor(
    readonly client: Client,
    readonly contract: ContractModel,
    readonly state: State,
    readonly ledger: Ledger,
    readonly options: RunOptions,
  ) {}

  send(request: Request): Promise<Exchange> {
    return this.client.send(request);
  }

  stream(request: Request): Promise<StreamExchange> {
    return this.client.openStream(request);
  }

  /** The answer must have this status (and error code); returns `data` of a success envelope. */
  expect(exchange: Exchange, status: number, code?: string): any {
    const got = exchange.json?.error?.code;
    if (exchange.status !== status || (code !== undefined && got !== code)) {
      throw new Mismatch(`expected ${status}${code ? ` ${code}` : ''}, got ${excerpt(exchange)}`, exchange);
    }
    return exchange.json?.data;
  }

  check(condition: unknown, message: string, exchange?: Exchange): void {
    if (!condition) throw new Mismatch(exchange ? `${message} (got ${excerpt(exchange)})` : message, exchange);
  }

  need<T>(value: T | undefined | null, what: string): T {
    if (value === undefined || value === null) throw new Blocked(`needs ${what}, which an earlier case did not produce`);
    return value;
  }

  note(text: string): void {
    this.notes.push(text);
  }
}
