import path from 'node:path';

/** Settings read once from the environment at start; see the README's configuration table. */
export interface Config {
  port: number;
  host: string;
  /** A PostgreSQL server; when absent the service runs an embedded PGlite database in `dataDir`. */
  databaseUrl: string | undefined;
  /**
   * `DATABASE_DIRECT_URL` (default: `databaseUrl`): the database itself, never a pooler in transaction
   * mode, for what needs one server session for a long time: LISTEN, session advisory locks, migrations.
   */
  databaseDirectUrl: string | undefined;
  dataDir: string;
  /**
   * `PUBLIC_URL`: the address people and mail reach the service at (an http(s) origin, perhaps with a
   * path prefix; no trailing slash), never taken from a request. Set, it is the default of `cdnUrl`,
   * of `passwordReset.url` and of the first-run invite link's address.
   */
  publicUrl: string | undefined;
  /** Public address icons are served from (`CDN_URL`, else `{PUBLIC_URL}/cdn`); when absent, the service's own `/cdn`. */
  cdnUrl: string | undefined;
  /** Where icons are kept (`ICON_STORE`): the database, or an S3-compatible bucket. */
  icons: { store: 'database' } | { store: 's3'; s3: S3Settings };
  logLevel: string;
  /** `pretty` for a terminal, `json` (the default) for log collectors. */
  logFormat: 'json' | 'pretty';
  bcryptRounds: number;
  /**
   * Requests a minute: sign-up, login and password changes per IP address, other routes per
   * credential, `/cdn` per IP address; 0 turns a limit off.
   */
  rateLimits: { auth: number; api: number; cdn: number };
  /**
   * Proxy hops in front of the service that append to `X-Forwarded-For` (`TRUST_PROXY`: a number,
   * `true` for one, `false`/0 for none). The client address is the right-most one no trusted proxy added.
   */
  trustProxy: number;
  /** Caps on what one user can grow (refused with 409 `limit_reached`), and live streams per user (429). */
  limits: {
    feedsPerProject: number;
    insightsPerProject: number;
    /** Members plus pending invites. */
    membersPerProject: number;
    projectsPerUser: number;
    apiTokensPerUser: number;
    webhooksPerProject: number;
    streamsPerUser: number;
    /** Sessions a user holds at once: a login past it ends the one used longest ago. */
    sessionsPerUser: number;
  };
  /** The HTTP server's bounds on connections and on slow clients, and on how long a shutdown may drain. */
  http: {
    maxConnections: number;
    /**
     * Connections one client address (an IPv6 /64) holds at once; 0 when `TRUST_PROXY` is set, where
     * every connection comes from the proxy, which must cap them itself.
     */
    maxConnectionsPerAddress: number;
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    keepAliveTimeoutMs: number;
    shutdownTimeoutMs: number;
  };
  /** Live event streams: a comment line every `heartbeatMs`, when each stream's access is also checked again. */
  live: { heartbeatMs: number };
  /** Bounds on waiting for PostgreSQL: connecting, a free pool connection, one statement. */
  database: {
    connectTimeoutMs: number;
    acquireTimeoutMs: number;
    statementTimeoutMs: number;
    /**
     * `DATABASE_PREPARED`: hand-written statements go as named prepared statements, kept per server
     * session; only for a `DATABASE_URL` that keeps them per client (PostgreSQL itself, a pooler in
     * session mode, or one that tracks prepared statements).
     */
    preparedStatements: boolean;
  };
  /** Events stored longer ago than this many days are deleted by the background maintenance; 0 keeps them forever. */
  eventRetentionDays: number;
  /** Origins allowed by CORS; empty: CORS off. */
  corsOrigins: string[];
  /** Prometheus metrics at /metrics, and the bearer token scrapes must send (none: open). */
  metrics: { enabled: boolean; token: string | undefined };
  stripe: {
    secretKey: string | undefined;
    webhookSecret: string | undefined;
    /** Stripe price id → tier, from `STRIPE_PRICE_TIERS=price_a:1,price_b:2`. */
    priceTiers: Map<string, number>;
    apiUrl: string;
    /** Where Stripe Checkout sends the browser after paying, and after giving up; both needed to start a checkout. */
    successUrl: string | undefined;
    cancelUrl: string | undefined;
    /** Where the Stripe Customer Portal sends the browser back to; needed to open it. */
    portalReturnUrl: string | undefined;
  };
  /**
   * Password resets: the mail server the links are sent through (`SMTP_URL`, `SMTP_FROM`; unset,
   * no mail is sent and the operator's `reset-link` command makes the links), and the page a link
   * opens (`PASSWORD_RESET_URL`, the token appended; else the console's page under `PUBLIC_URL`,
   * `{PUBLIC_URL}/reset-password?token=`; neither: the command prints the bare token).
   */
  passwordReset: { smtp: SmtpSettings | undefined; url: string | undefined };
  /**
   * The pages an e-mail change's two links open, the token appended (`EMAIL_CONFIRM_URL`,
   * `EMAIL_REVERT_URL`); unset, a message carries the bare token and the API call that takes it.
   * `PUBLIC_URL` gives them no default: the console has no pages that take these tokens.
   */
  emailChange: { confirmUrl: string | undefined; revertUrl: string | undefined };
  /**
   * The web console's build folder (`CONSOLE_DIR`: an `index.html` and its `assets/`); unset, the
   * console built beside the service (`console/dist`, http/console-assets.ts finds it).
   */
  consoleDir: string | undefined;
  /** Webhook deliveries (server/src/webhooks/, docs/webhooks.md). */
  webhooks: WebhookSettings;
}

/** How webhooks are delivered, and what they may reach. */
export interface WebhookSettings {
  /** `WEBHOOK_ALLOW_HTTP`: endpoints may be plain `http` (an intranet's receivers). */
  allowHttp: boolean;
  /** `WEBHOOK_ALLOW_PRIVATE`: endpoints may be loopback, private, link-local, … addresses (intranets, tests). */
  allowPrivate: boolean;
  /** `WEBHOOK_RETRY_SCHEDULE`: the waits before each retry, from the first failure on; after the last, a delivery fails. */
  retryScheduleMs: number[];
  /** `WEBHOOK_TIMEOUT_MS`: how long an attempt may take, connecting included (15 s). */
  timeoutMs: number;
  /** `WEBHOOK_DISABLE_AFTER`: how long an endpoint may fail without a success before it is turned off (3 days). */
  disableAfterMs: number;
  /** `WEBHOOK_CONCURRENCY`: attempts in flight at once on this instance, all endpoints together. */
  concurrency: number;
  /** `WEBHOOK_POLL_MS`: how often the deliverer looks for due deliveries when nothing woke it (retries, other instances' changes). */
  pollMs: number;
}

/** The mail server of `SMTP_URL`. The URL may hold a user and password: never logged nor shown. */
export interface SmtpSettings {
  url: string;
  /** The sender: an address, or `Name <address>`. */
  from: string;
}

/** The bucket icons are kept in with `ICON_STORE=s3`. */
export interface S3Settings {
  bucket: string;
  /** An S3-compatible service's address; unset: AWS's own for `region`. */
  endpoint: string | undefined;
  region: string;
  /** Both keys or neither: unset, the AWS SDK finds credentials itself (AWS_* variables, a role). Never logged. */
  credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  /** `<endpoint>/<bucket>/<key>` rather than `<bucket>.<endpoint>/<key>` (most self-hosted services want this). */
  forcePathStyle: boolean;
  /** The bound on each call to the bucket, retries included. */
  timeoutMs: number;
}

export class ConfigError extends Error {}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function logFormat(raw: string | undefined): 'json' | 'pretty' {
  if (raw === undefined || raw === '' || raw === 'json') return 'json';
  if (raw === 'pretty') return 'pretty';
  throw new ConfigError(`LOG_FORMAT must be json or pretty, got "${raw}"`);
}

/** `TRUST_PROXY`: a hop count, `true` (one hop) or `false`. */
function proxyHops(raw: string | undefined): number {
  const value = (raw ?? '').trim().toLowerCase();
  if (value === '' || value === 'false') return 0;
  if (value === 'true') return 1;
  if (/^\d{1,2}$/.test(value)) return Number(value);
  throw new ConfigError(`TRUST_PROXY must be true, false or a number of proxy hops, got "${raw}"`);
}

function boolean(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = (env[name] ?? '').toLowerCase();
  if (raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function origins(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((origin) => {
      let parsed: URL;
      try {
        parsed = new URL(origin);
      } catch {
        throw new ConfigError(`CORS_ORIGINS: "${origin}" is not an origin like https://app.example.com`);
      }
      if (parsed.origin !== origin) throw new ConfigError(`CORS_ORIGINS: "${origin}" is not an origin like https://app.example.com`);
      return origin;
    });
}

function priceTiers(raw: string | undefined): Map<string, number> {
  const tiers = new Map<string, number>();
  for (const pair of (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const match = /^([A-Za-z0-9_]+):(\d+)$/.exec(pair);
    if (!match) throw new ConfigError(`STRIPE_PRICE_TIERS: "${pair}" is not of the form price_id:tier`);
    tiers.set(match[1]!, Number(match[2]));
  }
  return tiers;
}

function url(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name] || undefined;
  if (raw === undefined) return undefined;
  try {
    new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  return raw.replace(/\/+$/, '');
}

/**
 * An absolute http(s) address Stripe sends a user's browser to, kept exactly as given: Stripe fills
 * placeholders such as `{CHECKOUT_SESSION_ID}` in it, and a trailing slash may matter to the page.
 */
function pageUrl(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name] || undefined;
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new ConfigError(`${name} must be an http or https address`);
  return raw;
}

const S3_VARIABLES = [
  'S3_BUCKET',
  'S3_ENDPOINT',
  'S3_REGION',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'S3_FORCE_PATH_STYLE',
  'S3_TIMEOUT_MS',
] as const;

/**
 * `ICON_STORE` and, for `s3`, its bucket. Messages name variables and never show a key's value.
 * S3 settings without `ICON_STORE=s3` are refused: icons would silently go to the database.
 */
function iconStore(env: NodeJS.ProcessEnv): Config['icons'] {
  const store = env.ICON_STORE || 'database';
  const s3Set = S3_VARIABLES.filter((name) => env[name]);
  if (store === 'database') {
    if (s3Set.length > 0) throw new ConfigError(`${s3Set.join(', ')} set, but ICON_STORE is not s3: set ICON_STORE=s3, or unset them`);
    return { store };
  }
  if (store !== 's3') throw new ConfigError(`ICON_STORE must be database or s3, got "${store}"`);
  const bucket = env.S3_BUCKET;
  if (!bucket) throw new ConfigError('ICON_STORE=s3 needs S3_BUCKET, the bucket to keep icons in');
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/.test(bucket)) {
    throw new ConfigError(`S3_BUCKET must be a bucket name (letters, digits, ".", "-", "_"), got "${bucket}"`);
  }
  const accessKeyId = env.S3_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.S3_SECRET_ACCESS_KEY || undefined;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new ConfigError("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither for the AWS SDK's own credentials");
  }
  const endpoint = url(env, 'S3_ENDPOINT');
  if (endpoint !== undefined && !/^https?:$/.test(new URL(endpoint).protocol)) {
    throw new ConfigError('S3_ENDPOINT must be an http or https URL');
  }
  return {
    store,
    s3: {
      bucket,
      endpoint,
      region: env.S3_REGION || 'us-east-1',
      credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
      forcePathStyle: boolean(env, 'S3_FORCE_PATH_STYLE'),
      timeoutMs: integer(env, 'S3_TIMEOUT_MS', 5_000, 100, 600_000),
    },
  };
}

function httpSettings(env: NodeJS.ProcessEnv): Config['http'] {
  const http = {
    maxConnections: integer(env, 'HTTP_MAX_CONNECTIONS', 1_000, 1, 1_000_000),
    // A browser holds about 6 connections to an origin, and an SDK client one per call in flight (a
    // burst of a couple of hundred calls at once is ordinary): 256 leaves room for both, and one
    // address at most a quarter of the default total, so it cannot starve every other client by
    // holding sockets open.
    maxConnectionsPerAddress: proxyHops(env.TRUST_PROXY) > 0 ? 0 : integer(env, 'HTTP_MAX_CONNECTIONS_PER_ADDRESS', 256, 1, 1_000_000),
    headersTimeoutMs: integer(env, 'HTTP_HEADERS_TIMEOUT_MS', 10_000, 1_000, 600_000),
    requestTimeoutMs: integer(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 1_000, 3_600_000),
    keepAliveTimeoutMs: integer(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 1_000, 600_000),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 1_000, 600_000),
  };
  // Node refuses a headers timeout longer than the request's; a drain must outlast an idle connection.
  if (http.headersTimeoutMs > http.requestTimeoutMs)
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS');
  if (http.keepAliveTimeoutMs >= http.shutdownTimeoutMs)
    throw new ConfigError('SHUTDOWN_TIMEOUT_MS must exceed HTTP_KEEP_ALIVE_TIMEOUT_MS');
  return http;
}

/**
 * `PUBLIC_URL`: an http(s) origin with an optional path prefix, and nothing else (no user, query or
 * fragment); trailing slashes dropped. The message does not show the value, which might hold a password.
 */
function publicUrl(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  const parsed = parsedUrl(raw);
  if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.username || parsed.password || /[?#]/.test(raw)) {
    throw new ConfigError(
      'PUBLIC_URL must be the http or https address people reach the service at, optionally with a path and nothing after it, like https://signalboard.example.com',
    );
  }
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
}

/** The console's page that sets a new password, the token appended (console/src/pages/reset-password.tsx). */
const CONSOLE_RESET_PATH = '/reset-password?token=';

/**
 * `SMTP_URL`, `SMTP_FROM` and `PASSWORD_RESET_URL` (by default the console's reset page under
 * `PUBLIC_URL`, when that is set). Messages name the variables and never show `SMTP_URL`, whose
 * password they would print. Mail needs a sender and a page for its link; a sender without a server
 * is refused, as it would silently send nothing.
 */
function passwordReset(env: NodeJS.ProcessEnv, publicAddress: string | undefined): Config['passwordReset'] {
  const explicitUrl = env.PASSWORD_RESET_URL || undefined;
  if (explicitUrl !== undefined && !/^https?:$/.test(parsedUrl(explicitUrl)?.protocol ?? '')) {
    throw new ConfigError('PASSWORD_RESET_URL must be an http or https URL, like https://app.example.com/reset?token=');
  }
  const resetUrl = explicitUrl ?? (publicAddress === undefined ? undefined : `${publicAddress}${CONSOLE_RESET_PATH}`);
  const smtpUrl = env.SMTP_URL || undefined;
  const from = env.SMTP_FROM || undefined;
  if (smtpUrl === undefined) {
    if (from !== undefined) throw new ConfigError('SMTP_FROM set, but SMTP_URL is not: set SMTP_URL to send mail, or unset SMTP_FROM');
    return { smtp: undefined, url: resetUrl };
  }
  if (!/^smtps?:$/.test(parsedUrl(smtpUrl)?.protocol ?? '')) {
    throw new ConfigError('SMTP_URL must be an smtp:// or smtps:// URL, like smtp://user:password@mail.example.com:587');
  }
  if (from === undefined || !/^[^<>@\s]+@[^<>@\s]+$|<[^<>@\s]+@[^<>@\s]+>$/.test(from.trim())) {
    throw new ConfigError('SMTP_URL needs SMTP_FROM, the sender: an address, or Name <address>');
  }
  if (resetUrl === undefined) {
    throw new ConfigError(
      'SMTP_URL needs PASSWORD_RESET_URL, the page the e-mailed link opens (or PUBLIC_URL, for the console page under it)',
    );
  }
  return { smtp: { url: smtpUrl, from: from.trim() }, url: resetUrl };
}

function parsedUrl(raw: string): URL | undefined {
  try {
    return new URL(raw);
  } catch {
    return undefined;
  }
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration like `500ms`, `5s`, `30m`, `2h` or `3d`, in milliseconds. */
function duration(name: string, raw: string): number {
  const match = /^(\d{1,9})(ms|s|m|h|d)$/.exec(raw.trim());
  if (!match) throw new ConfigError(`${name}: "${raw}" is not a duration like 500ms, 5s, 30m, 2h or 3d`);
  return Number(match[1]) * DURATION_UNITS[match[2]!]!;
}

/** The longest `WEBHOOK_DISABLE_AFTER`: a year, which the service description states in whole seconds (`GET /v1`). */
const MAX_DISABLE_AFTER_MS = 365 * DURATION_UNITS.d!;

/** `WEBHOOK_DISABLE_AFTER`: from a second to a year. */
function disableAfter(raw: string): number {
  const ms = duration('WEBHOOK_DISABLE_AFTER', raw);
  if (ms < 1000 || ms > MAX_DISABLE_AFTER_MS) throw new ConfigError(`WEBHOOK_DISABLE_AFTER: "${raw}" is not between 1s and 365d`);
  return ms;
}

/** `DATABASE_DIRECT_URL`, else `DATABASE_URL`; alone it would name a database the service does not use. */
function directUrl(env: NodeJS.ProcessEnv): string | undefined {
  const databaseUrl = url(env, 'DATABASE_URL');
  const direct = url(env, 'DATABASE_DIRECT_URL');
  if (direct !== undefined && databaseUrl === undefined) {
    throw new ConfigError('DATABASE_DIRECT_URL set, but DATABASE_URL is not: set DATABASE_URL too, or unset DATABASE_DIRECT_URL');
  }
  return direct ?? databaseUrl;
}

function webhookSettings(env: NodeJS.ProcessEnv): WebhookSettings {
  const schedule = (env.WEBHOOK_RETRY_SCHEDULE || '5s,5m,30m,2h,5h,10h,10h').split(',').map((d) => duration('WEBHOOK_RETRY_SCHEDULE', d));
  if (schedule.length > 20) throw new ConfigError('WEBHOOK_RETRY_SCHEDULE: at most 20 retries');
  return {
    allowHttp: boolean(env, 'WEBHOOK_ALLOW_HTTP'),
    allowPrivate: boolean(env, 'WEBHOOK_ALLOW_PRIVATE'),
    retryScheduleMs: schedule,
    timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 15_000, 100, 60_000),
    disableAfterMs: disableAfter(env.WEBHOOK_DISABLE_AFTER || '3d'),
    concurrency: integer(env, 'WEBHOOK_CONCURRENCY', 256, 1, 10_000),
    pollMs: integer(env, 'WEBHOOK_POLL_MS', 1_000, 10, 60_000),
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const publicAddress = publicUrl(env.PUBLIC_URL);
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '0.0.0.0',
    databaseUrl: url(env, 'DATABASE_URL'),
    databaseDirectUrl: directUrl(env),
    dataDir: path.resolve(env.DATA_DIR || './data'),
    publicUrl: publicAddress,
    cdnUrl: url(env, 'CDN_URL') ?? (publicAddress === undefined ? undefined : `${publicAddress}/cdn`),
    icons: iconStore(env),
    logLevel: env.LOG_LEVEL || 'info',
    logFormat: logFormat(env.LOG_FORMAT),
    bcryptRounds: integer(env, 'BCRYPT_ROUNDS', 10, 4, 15),
    rateLimits: {
      auth: integer(env, 'AUTH_RATE_LIMIT', 10, 0, 1_000_000),
      api: integer(env, 'API_RATE_LIMIT', 600, 0, 1_000_000),
      cdn: integer(env, 'CDN_RATE_LIMIT', 1_200, 0, 1_000_000),
    },
    trustProxy: proxyHops(env.TRUST_PROXY),
    limits: {
      feedsPerProject: integer(env, 'MAX_FEEDS_PER_PROJECT', 100, 1, 100_000),
      insightsPerProject: integer(env, 'MAX_INSIGHTS_PER_PROJECT', 100, 1, 100_000),
      membersPerProject: integer(env, 'MAX_MEMBERS_PER_PROJECT', 1_000, 1, 100_000),
      projectsPerUser: integer(env, 'MAX_PROJECTS_PER_USER', 100, 1, 100_000),
      apiTokensPerUser: integer(env, 'MAX_API_TOKENS_PER_USER', 50, 1, 100_000),
      webhooksPerProject: integer(env, 'MAX_WEBHOOKS_PER_PROJECT', 10, 1, 1_000),
      streamsPerUser: integer(env, 'MAX_STREAMS_PER_USER', 20, 1, 10_000),
      sessionsPerUser: integer(env, 'MAX_SESSIONS_PER_USER', 100, 1, 100_000),
    },
    http: httpSettings(env),
    webhooks: webhookSettings(env),
    live: { heartbeatMs: integer(env, 'LIVE_HEARTBEAT_MS', 15_000, 100, 600_000) },
    database: {
      connectTimeoutMs: integer(env, 'DB_CONNECT_TIMEOUT_MS', 3_000, 100, 600_000),
      acquireTimeoutMs: integer(env, 'DB_ACQUIRE_TIMEOUT_MS', 3_000, 100, 600_000),
      statementTimeoutMs: integer(env, 'DB_STATEMENT_TIMEOUT_MS', 5_000, 100, 3_600_000),
      preparedStatements: boolean(env, 'DATABASE_PREPARED'),
    },
    eventRetentionDays: integer(env, 'EVENT_RETENTION_DAYS', 90, 0, 36_500),
    corsOrigins: origins(env.CORS_ORIGINS),
    metrics: { enabled: boolean(env, 'METRICS_ENABLED'), token: env.METRICS_TOKEN || undefined },
    stripe: {
      secretKey: env.STRIPE_SECRET_KEY || undefined,
      webhookSecret: env.STRIPE_WEBHOOK_SECRET || undefined,
      priceTiers: priceTiers(env.STRIPE_PRICE_TIERS),
      apiUrl: url(env, 'STRIPE_API_URL') ?? 'https://api.stripe.com',
      successUrl: pageUrl(env, 'STRIPE_SUCCESS_URL'),
      cancelUrl: pageUrl(env, 'STRIPE_CANCEL_URL'),
      portalReturnUrl: pageUrl(env, 'STRIPE_PORTAL_RETURN_URL'),
    },
    passwordReset: passwordReset(env, publicAddress),
    emailChange: { confirmUrl: pageUrl(env, 'EMAIL_CONFIRM_URL'), revertUrl: pageUrl(env, 'EMAIL_REVERT_URL') },
    consoleDir: env.CONSOLE_DIR ? path.resolve(env.CONSOLE_DIR) : undefined,
  };
}
