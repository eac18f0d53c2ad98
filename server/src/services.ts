import type { Logger } from 'pino';
import { createBilling, type Billing } from './billing/index.js';
import type { Config } from './config.js';
import { onCommitted } from './db/commit-notices.js';
import { unitOfWork, type Database } from './db/orm.js';
import { Accounts } from './domain/accounts.js';
import { Activity } from './domain/activity.js';
import { Subscriptions } from './domain/billing.js';
import { Credentials } from './domain/credentials.js';
import { EndUsers } from './domain/end-users.js';
import { Events } from './domain/events.js';
import { Feeds } from './domain/feeds.js';
import { DatabaseIconRows } from './domain/icons.js';
import { Insights } from './domain/insights.js';
import { LogSnag } from './domain/logsnag.js';
import { Members } from './domain/members.js';
import { Projects } from './domain/projects.js';
import { notifyThrough } from './db/listen-notify.js';
import { EmailChanges } from './domain/email-change.js';
import { PasswordResets } from './domain/password-reset.js';
import { viewersStillAllowed } from './domain/stream-access.js';
import { RateLimits } from './http/rate-limit.js';
import { LocalBus, PostgresBus, type EventBus } from './live/bus.js';
import { LiveStreams } from './live/streams.js';
import { MailOutbox } from './mail/outbox.js';
import { smtpMailer } from './mail/smtp.js';
import { Maintenance } from './maintenance/prune.js';
import { IconStore } from './storage/icons.js';
import { S3Bucket } from './storage/s3.js';
import type { ChangeShapes } from './domain/change-shapes.js';
import { presentEvent, presentInsight, presentMember, presentProject } from './presenters/project-presenters.js';
import { Deliverer, onEndpointsDisabled, Webhooks } from './webhooks/index.js';

/**
 * What handlers may reach beyond their request: built once per server by createServices. The
 * request pipeline's own parts (the contract, the rate limits, the ORM) are not here: a handler has
 * no business with them.
 */
export interface Services {
  config: Config;
  logger: Logger;
  accounts: Accounts;
  /** The caller's sessions and API tokens. */
  credentials: Credentials;
  events: Events;
  feeds: Feeds;
  insights: Insights;
  endUsers: EndUsers;
  /** LogSnag's requests, mapped onto the modules above. */
  logsnag: LogSnag;
  projects: Projects;
  /** A project's members and invites, and its hand-over. */
  members: Members;
  /** Projects' plans: Stripe's events, checkouts, the customer portal. */
  subscriptions: Subscriptions;
  /** A project's log, as its members read it. */
  activity: Activity;
  icons: IconStore;
  billing: Billing;
  live: LiveStreams;
  /** Password reset requests and confirmations; mail goes out after the answer. */
  passwordResets: PasswordResets;
  /** E-mail changes: request, confirm, undo; mail goes out after the answer. */
  emailChanges: EmailChanges;
  /** A project's webhook endpoints, and the attempts a member asks for (a test, a retry now, a recovery). */
  webhooks: Webhooks;
  /** Why the embedded database has stopped for good, once it has (a PANIC, as on a full disk): health answers 503 then. */
  databaseFailure(): string | undefined;
}

/** What createServices builds besides the services: the request pipeline's rate limits, and how to stop it all. */
export interface BuiltServices {
  services: Services;
  rateLimits: RateLimits;
  close(): Promise<void>;
}

/**
 * Builds the services over an open database. `ownUrl`, the address the service listens on, is read
 * lazily: it is known only once it listens. It makes the default `/cdn` address when neither
 * `CDN_URL` nor `PUBLIC_URL` is set (with either, `config.cdnUrl` holds the address).
 */
export async function createServices(config: Config, logger: Logger, db: Database, ownUrl: () => string): Promise<BuiltServices> {
  const bus: EventBus =
    db.kind === 'postgresql'
      ? await PostgresBus.start(config.databaseDirectUrl!, notifyThrough(db), logger, config.database)
      : new LocalBus();
  const live = new LiveStreams(db.orm, bus, (viewers) => viewersStillAllowed(unitOfWork(db.orm), viewers), logger, {
    heartbeatMs: config.live.heartbeatMs,
    maxBufferedBytes: 1024 * 1024,
    maxStreamsPerUser: config.limits.streamsPerUser,
  });
  const outbox = new MailOutbox(config.passwordReset.smtp && smtpMailer(config.passwordReset.smtp), logger);
  const icons = new IconStore(new DatabaseIconRows(() => unitOfWork(db.orm)), () => config.cdnUrl ?? `${ownUrl()}/cdn`, {
    bucket: config.icons.store === 's3' ? await S3Bucket.open(config.icons.s3, logger) : undefined,
  });
  const webhookShapes: ChangeShapes = {
    member: (user, role) => presentMember(user, icons, role),
    project: (view) => presentProject(view, icons),
    insight: presentInsight,
    event: presentEvent,
  };
  const deliverer = new Deliverer({
    db,
    settings: config.webhooks,
    logger,
    onDisabled: onEndpointsDisabled(db, outbox, logger, config.webhooks),
    shapes: webhookShapes,
  });
  // Events stored on any instance: their deliveries are due now.
  bus.subscribe(
    (message) => {
      if (message.kind === 'event') deliverer.wake();
    },
    () => deliverer.wake(),
  );
  // What every committed change declared (db/commit-notices.ts): the fan-out tells every instance,
  // which never fails the request that made the change; queued deliveries are sent now.
  onCommitted(db.orm.em, (notices) => {
    for (const notice of notices) {
      if (notice.kind === 'deliveries-queued') deliverer.wake();
      else bus.announce(notice).catch((error: unknown) => logger.warn({ err: error, kind: notice.kind }, 'live announce failed'));
    }
  });
  const { limits } = config;
  const events = new Events();
  const feeds = new Feeds({ limits });
  const insights = new Insights({ limits, shapes: webhookShapes });
  const endUsers = new EndUsers();
  const billing = await createBilling(config.stripe, logger);
  const services: Services = {
    config,
    logger,
    accounts: new Accounts({ bcryptRounds: config.bcryptRounds, sessionsPerUser: limits.sessionsPerUser, icons, billing }),
    credentials: new Credentials({ limits }),
    events,
    feeds,
    insights,
    endUsers,
    logsnag: new LogSnag({ events, feeds, insights, endUsers }),
    projects: new Projects({ icons, billing, limits, shapes: webhookShapes }),
    members: new Members({ limits, shapes: webhookShapes }),
    subscriptions: new Subscriptions({ billing, priceTiers: config.stripe.priceTiers }),
    activity: new Activity(),
    icons,
    billing,
    live,
    webhooks: new Webhooks({ settings: config.webhooks, limits: config.limits, deliverer }),
    passwordResets: new PasswordResets(db.orm, { bcryptRounds: config.bcryptRounds, linkBase: config.passwordReset.url }, outbox, logger),
    emailChanges: new EmailChanges(outbox, config.emailChange, logger),
    databaseFailure: () => db.failed(),
  };
  const rateLimits = RateLimits.create(config, db, logger);
  // Before the service listens: icons an earlier release kept on disk are served from the first request.
  const maintenance = await new Maintenance(db, services.icons, logger, config).start();
  deliverer.start();
  return {
    services,
    rateLimits,
    close: async () => {
      await deliverer.stop();
      await maintenance.stop();
      rateLimits.close();
      await outbox.close();
      live.close();
      await bus.close();
    },
  };
}
