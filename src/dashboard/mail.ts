import type { Config } from '../config';
import { SIGN_IN, type CodeSender } from '../domain/people/people';
import type { Logger } from '../log';
import { createMailer } from '../mailer';

// Sign-in codes go out by email over SMTP_URL. Without it (local development) the code is written
// to the server log: the one place a credential is ever logged, and only when no mail is set up.
export function codeSender(config: Config, log: Logger): CodeSender {
  const mailer = createMailer(config, log);
  if (!mailer) {
    return (to, code) => log.info('sign_in_code', { email: to.email, code, note: 'SMTP_URL is not set, so the code is logged instead of emailed' });
  }
  return (to, code) =>
    mailer(
      {
        to: to.email,
        subject: `Your sign-in code: ${code}`,
        text: `Hello ${to.username},\n\nYour code to sign in to the Agent Messaging Service dashboard is ${code}.\nIt is valid for ${SIGN_IN.codeTtlMinutes} minutes and works once. If you did not ask for it, ignore this email.\n`,
      },
      'sign_in_code',
    );
}
