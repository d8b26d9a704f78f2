import nodemailer from 'nodemailer';
import type { Config } from './config';
import type { Logger } from './log';

export type Mail = { to: string; subject: string; text: string };
// Sends without waiting: the outcome is logged (`event` names what was sent), never thrown.
export type Mailer = (mail: Mail, event: string) => void;

// Email over SMTP_URL (a nodemailer URL), from SMTP_FROM; null when no mail is set up, so that each
// caller says what it does instead (sign-in codes are logged, warnings only logged and shown).
export function createMailer(config: Config, log: Logger): Mailer | null {
  if (!config.SMTP_URL) return null;
  const transport = nodemailer.createTransport(config.SMTP_URL);
  return (mail, event) => {
    transport.sendMail({ from: config.SMTP_FROM, ...mail }).then(
      () => log.info(`${event}_sent`, { email: mail.to }),
      (error: Error) => log.error(`${event}_not_sent`, { email: mail.to, error: error.message }),
    );
  };
}
