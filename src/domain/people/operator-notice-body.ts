import { describeOutcome } from '../deliveries/retry-policy';
import type { EndpointReason, OperatorNotice } from './operator-notices';

// What an operator notice says (operator-notices.ts): a title and a sentence a person understands,
// the reason where there is one (what a failing endpoint answered), and a link to the dashboard's
// page for it where the service's address is known (PUBLIC_URL). Written as the webhook's format
// asks: `slack`, the body of a Slack incoming webhook (`text` for the notification, `blocks` of
// mrkdwn sections), or `json`, a typed event (docs/reference/operator-notices.md).
export type NoticeFormat = 'slack' | 'json';
export const NOTICE_FORMATS: NoticeFormat[] = ['slack', 'json'];

export type NoticeWords = { title: string; text: string; reason: string | null };

// A time as people read it in a message: to the minute, in UTC.
const when = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
const plural = (n: number, one: string, many: string) => (n === 1 ? `1 ${one}` : `${n} ${many}`);

export function reasonText(r: EndpointReason): string {
  const outcome = describeOutcome(r);
  return r.answer ? `${outcome}: "${r.answer.replace(/\s+/g, ' ').trim()}"` : outcome;
}

export function noticeWords(n: OperatorNotice): NoticeWords {
  switch (n.event) {
    case 'endpoint.warned': {
      const off = n.switchesOffAt ? ` It will be switched off at ${when(n.switchesOffAt)} unless it answers.` : '';
      return {
        title: `Webhook failing: ${n.agent}`,
        text: `${n.agent}'s webhook (${n.url}) has answered no attempt with 2xx since ${when(n.failingSince)} (warning ${n.stage} of ${n.stages}).${off}`,
        reason: reasonText(n.reason),
      };
    }
    case 'endpoint.switched_off':
      return {
        title: `Webhook switched off: ${n.agent}`,
        text: `${n.agent}'s webhook (${n.url}) answered no attempt with 2xx since ${when(n.failingSince)}, so it was switched off: its messages wait in its inbox until a person switches it back on from the Agents page.`,
        reason: reasonText(n.reason),
      };
    case 'endpoint.back':
      return n.how === 'answered'
        ? { title: `Webhook answering again: ${n.agent}`, text: `${n.agent}'s webhook (${n.url}) answered with 2xx at ${when(n.at)}: its doorbells go out again.`, reason: null }
        : { title: `Webhook switched back on: ${n.agent}`, text: `${n.by ?? 'A person'} switched ${n.agent}'s webhook (${n.url}) back on at ${when(n.at)}.`, reason: null };
    case 'holds.waiting': {
      const waits = n.waiting === 1 ? '1 message waits' : `${n.waiting} messages wait`;
      const oldest = n.oldest ? `, from ${n.oldest.sender} in "${n.oldest.threadTitle}": ${n.oldest.line}` : '';
      return {
        title: `${waits} for approval`,
        text: `${waits} for a person's approval (${plural(n.fresh, 'new', 'new')} since the last notice); the oldest since ${when(n.oldestAt)}${oldest}. No recipient sees a message before a person approves it.`,
        reason: null,
      };
    }
    case 'thread.loop_broken':
      return {
        title: `Thread paused by the loop breaker: ${n.title}`,
        text: `The agents of "${n.title}" exchanged more than ${n.messages} messages within ${plural(n.windowMinutes, 'minute', 'minutes')} with no person's message among them, so the thread was paused at ${when(n.pausedAt)}. Its further messages wait for a person's approval until a person resumes it.`,
        reason: null,
      };
    case 'test':
      return { title: 'Test notice', text: `${n.requestedBy} sent this test notice at ${when(n.at)}: notices reach this webhook.`, reason: null };
  }
}

// The dashboard's page for what a notice tells of.
export function noticePath(n: OperatorNotice): string {
  switch (n.event) {
    case 'endpoint.warned':
    case 'endpoint.switched_off':
    case 'endpoint.back':
      return `/dashboard/agents?q=${encodeURIComponent(n.agent)}`;
    case 'holds.waiting':
      return '/dashboard/overview#waiting';
    case 'thread.loop_broken':
      return `/dashboard/threads/${n.threadId}`;
    case 'test':
      return '/dashboard/notifications';
  }
}

export const noticeLink = (n: OperatorNotice, publicUrl?: string) => (publicUrl ? new URL(noticePath(n), publicUrl).toString() : null);

// Slack's mrkdwn takes &, < and > as markup: each is escaped so that text can never make a link.
// A section holds at most 3 000 characters (Slack refuses the whole message past it), and a
// sentence can quote a 2 048-character URL or a long thread title: each part is cut to `max`
// characters once escaped, never inside an escape.
function mrkdwn(text: string, max: number): string {
  const escaped = text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  return escaped.length <= max ? escaped : `${Array.from(escaped).slice(0, max - 1).join('').replace(/&[a-z]*$/, '')}…`;
}
const section = (text: string) => ({ type: 'section', text: { type: 'mrkdwn', text } });

export function operatorNoticeBody(sent: { id: string; notice: OperatorNotice; createdAt: string }, format: NoticeFormat, publicUrl?: string): string {
  const words = noticeWords(sent.notice);
  const link = noticeLink(sent.notice, publicUrl);
  if (format === 'json') {
    const { event, ...data } = sent.notice;
    return JSON.stringify({ type: event, id: sent.id, timestamp: sent.createdAt, title: words.title, text: words.text, reason: words.reason, link, data });
  }
  const blocks = [
    section(`*${mrkdwn(words.title, 300)}*\n${mrkdwn(words.text, 2_600)}`),
    ...(words.reason ? [section(`*Last answer:* ${mrkdwn(words.reason, 2_900)}`)] : []),
    ...(link ? [section(`<${link}|Open on the dashboard>`)] : []),
  ];
  return JSON.stringify({ text: `${words.title}: ${words.text}`, blocks });
}
