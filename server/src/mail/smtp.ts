/**
 * Outgoing mail through an SMTP server (`SMTP_URL`), with nodemailer. Each message opens its own
 * connection, bounded in time at every step, so a mail server that is down or stalls costs one
 * failed send, never a held resource.
 */
import { createTransport } from 'nodemailer';
import type { SmtpSettings } from '../config.js';

export interface Message {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(message: Message): Promise<void>;
  close(): void;
}

/** Bounds on connecting, on the server's greeting, and on each silence of the connection after that. */
const TIMEOUT_MS = 10_000;

export function smtpMailer(settings: SmtpSettings): Mailer {
  const transport = createTransport(
    { url: settings.url, connectionTimeout: TIMEOUT_MS, greetingTimeout: TIMEOUT_MS, socketTimeout: TIMEOUT_MS },
    { from: settings.from },
  );
  return {
    async send(message) {
      await transport.sendMail(message);
    },
    close: () => transport.close(),
  };
}
