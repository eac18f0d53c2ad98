/**
 * Mail sent after the answer: the request that causes a message never waits for the mail server,
 * and a slow or broken one never reaches it. A failure is logged by its kind and codes only (its
 * message may quote an address). Messages still being sent are bounded: past `MAX_PENDING` (a mail
 * server stalling under a flood) further ones are dropped and logged, rather than held in memory.
 */
import type { Logger } from '../logger.js';
import type { Mailer } from './smtp.js';

const MAX_PENDING = 100;

export class MailOutbox {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    /** Undefined when no mail is configured (`SMTP_URL` unset): nothing is sent. */
    readonly mailer: Mailer | undefined,
    private readonly logger: Logger,
  ) {}

  /**
   * Runs `work` with the mailer after the caller has moved on; `what` names the message in logs.
   * Never fails; false when nothing was started (no mailer, or too many pending).
   */
  post(what: string, work: (mailer: Mailer) => Promise<void>): boolean {
    if (!this.mailer) return false;
    if (this.pending.size >= MAX_PENDING) {
      this.logger.warn({ pending: this.pending.size }, `${what} mail dropped: too many still being sent`);
      return false;
    }
    const sending: Promise<void> = work(this.mailer)
      .catch((error: unknown) => this.logger.warn({ err: error }, `${what} mail not sent`))
      .finally(() => this.pending.delete(sending));
    this.pending.add(sending);
    return true;
  }

  /** Waits for the messages still being sent (each bounded by the mail timeouts), then closes the mailer. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.pending]);
    this.mailer?.close();
  }
}
