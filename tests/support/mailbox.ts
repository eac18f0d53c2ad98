/** An SMTP server for tests: takes mail for any address after a login, and keeps what it gets, parsed. */
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { secret } from './harness.js';

const SMTP_USER = 'mailer';
const SMTP_PASSWORD = secret('smtp-test-password-5d1f');

export interface Mail {
  to: string[];
  from: { name: string; address: string };
  subject: string;
  text: string;
}

/** An SMTP server on 127.0.0.1 that takes mail for any address, after a login, and keeps what it gets. */
export class Mailbox {
  private constructor(
    private readonly server: SMTPServer,
    readonly port: number,
    readonly mails: Mail[],
    private readonly arrived: Set<() => void>,
  ) {}

  static async start(): Promise<Mailbox> {
    const mails: Mail[] = [];
    const arrived = new Set<() => void>();
    const server = new SMTPServer({
      secure: false,
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      logger: false,
      onAuth(auth, _session, callback) {
        if (auth.username === SMTP_USER && auth.password === SMTP_PASSWORD) callback(null, { user: SMTP_USER });
        else callback(new Error('wrong login'));
      },
      onData(stream, session, callback) {
        simpleParser(stream).then(
          (parsed) => {
            mails.push({
              to: session.envelope.rcptTo.map((r) => r.address),
              from: { name: parsed.from?.value[0]?.name ?? '', address: parsed.from?.value[0]?.address ?? '' },
              subject: parsed.subject ?? '',
              text: parsed.text ?? '',
            });
            for (const notify of arrived) notify();
            callback();
          },
          (err: Error) => callback(err),
        );
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new Mailbox(server, (server.server.address() as AddressInfo).port, mails, arrived);
  }

  get url(): string {
    return `smtp://${SMTP_USER}:${SMTP_PASSWORD}@127.0.0.1:${this.port}`;
  }

  /** The mails to `address` (without regard to case, as addresses are compared), once there are `n` of them. */
  async waitFor(address: string, n = 1, timeoutMs = 15_000): Promise<Mail[]> {
    const to = address.toLowerCase();
    const found = () => this.mails.filter((m) => m.to.some((recipient) => recipient.toLowerCase() === to));
    if (found().length >= n) return found();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.arrived.delete(check);
        reject(new Error(`no ${n} mail(s) to ${address} within ${timeoutMs} ms (got ${found().length})`));
      }, timeoutMs);
      const check = () => {
        if (found().length < n) return;
        clearTimeout(timer);
        this.arrived.delete(check);
        resolve(found());
      };
      this.arrived.add(check);
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
