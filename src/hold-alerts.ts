import type { Task } from 'graphile-worker';
import type { Sql } from './db/connect';
import { claimPauseNotices, claimWaitingDigest, DIGEST_EVERY_MINUTES, type PauseNotice, type WaitingDigest } from './domain/messages/hold-notices';
import { DECIDE_AT_ONCE, expireHolds } from './domain/messages/holds';
import { mintHoldLinks, removeDeadHoldLinks } from './domain/messages/hold-links';
import { everyPersonsEmail } from './domain/people/people';
import { hasOperatorWebhooks } from './domain/people/operator-webhooks';
import type { Logger } from './log';
import type { Mailer } from './mailer';
import type { Metrics } from './metrics';

// Every minute, from the worker's crontab: holds no person decided in time are rejected, and
// people are emailed (where SMTP is set up) when messages start waiting for them and when the loop
// breaker pauses a thread.
export const EXPIRE_HOLDS_TASK = 'expire_holds';
export const HOLD_NOTICES_TASK = 'hold_notices';
export const HOLD_CRONTAB = [`* * * * * ${EXPIRE_HOLDS_TASK}`, `* * * * * ${HOLD_NOTICES_TASK}`];

export type HoldAlertDeps = { sql: Sql; log: Logger; metrics?: Metrics; mailer: Mailer | null; publicUrl?: string; holdHours: number };

export function holdTasks(deps: HoldAlertDeps): Record<string, Task> {
  return {
    [EXPIRE_HOLDS_TASK]: async () => {
      const expired = await expireHolds(deps.sql, DECIDE_AT_ONCE, deps.holdHours);
      await removeDeadHoldLinks(deps.sql, DECIDE_AT_ONCE);
      if (expired === 0) return;
      deps.log.info('holds_expired', { expired });
      deps.metrics?.holdDecisions({ expired });
    },
    [HOLD_NOTICES_TASK]: async () => {
      // Without mail or an operator webhook nothing is claimed: the Overview and the badge tell
      // people instead. The digest's claim queues its operator notice (hold-notices.ts); the loop
      // breaker tells operator webhooks of a pause itself, at once.
      if (!deps.mailer && !(await hasOperatorWebhooks(deps.sql))) return;
      const digest = await claimWaitingDigest(deps.sql);
      if (!deps.mailer) return;
      const pauses = await claimPauseNotices(deps.sql);
      // Each person's digest carries links of its own, spent once (hold-links.ts).
      if (digest) {
        const links = await mintHoldLinks(deps.sql, digest.first.map((m) => m.id));
        for (const { email, links: own } of links) deps.mailer({ to: email, ...digestMail(digest, own, deps.publicUrl) }, 'holds_waiting_mail');
      }
      if (pauses.length === 0) return;
      const people = await everyPersonsEmail(deps.sql);
      for (const p of pauses) for (const to of people) deps.mailer({ to, ...pauseMail(p, deps.publicUrl) }, 'thread_paused_mail');
    },
  };
}

const WHY: Record<WaitingDigest['first'][number]['reason'], string> = {
  agent: 'its sender is held',
  thread: 'its thread is held',
  loop: 'the loop breaker paused its thread',
};

// A link to the page, which asks the person to sign in as any visit does; where the service's
// address is unknown (no PUBLIC_URL), the page is named instead.
const overviewAt = (publicUrl?: string) =>
  publicUrl ? `Decide on the dashboard's Overview: ${new URL('/dashboard/overview', publicUrl)}` : "Decide on the dashboard's Overview.";

// `links`: the person's one-time link to each message's decision, by message id; written out
// only where the service's address is known.
function digestMail(d: WaitingDigest, links: Map<string, string>, publicUrl?: string) {
  const n = d.waiting === 1 ? '1 message waits' : `${d.waiting} messages wait`;
  const linkTo = (id: string) => (publicUrl && links.has(id) ? `\n  Decide (one-time link; you sign in as usual): ${new URL(links.get(id)!, publicUrl)}` : '');
  const lines = d.first.map((m) => `- ${m.sender} in "${m.threadTitle}" (${WHY[m.reason]}): ${m.line}${linkTo(m.id)}`);
  const more = d.waiting > d.first.length ? [`- and ${d.waiting - d.first.length} more`] : [];
  return {
    subject: `${n} for your approval`,
    text: `${n} for a person's approval (${d.fresh} since the last email); the oldest since ${d.oldestAt}. Until a person approves one, no recipient sees it.\n\n${[...lines, ...more].join('\n')}\n\n${overviewAt(publicUrl)}\n\nThis email goes out at most once every ${DIGEST_EVERY_MINUTES} minutes.\n`,
  };
}

function pauseMail(p: PauseNotice, publicUrl?: string) {
  const where = publicUrl ? `\n\n${new URL(`/dashboard/threads/${p.threadId}`, publicUrl)}` : '';
  return {
    subject: `Thread paused by the loop breaker: ${p.title}`,
    text: `The agents of "${p.title}" exchanged too many messages with no person's message among them, so the thread was paused at ${p.pausedAt}. Its further messages wait for a person's approval until a person resumes it from the thread's page.${where}\n`,
  };
}
