import { html } from './html.ts';
import { failureKind, shortTime } from './ui.ts';

// What a failing webhook says of itself wherever it is listed (the Agents row, its health detail,
// the Overview's trouble lines): the handler's own reason beside the status, and the warnings
// reached with the switch-off to come.

export type FailureFacts = { status: number | null; error: string | null; body: string | null };
export type WarningFacts = { warnedStage: number; warnStages: number; warnedAt: string | null; switchesOffAt: string | null };

// The first characters of the handler's answer on one line, quoted; the rest is on the detail.
const excerpt = (body: string, chars: number) => {
  const line = body.replace(/\s+/g, ' ').trim();
  return line.length > chars ? `${line.slice(0, chars - 1)}…` : line;
};

// "HTTP 503 “upstream down”": the status (or the connection's error) and what the handler answered.
export function FailureReason({ facts, chars = 80 }: { facts: FailureFacts; chars?: number }) {
  const body = facts.body?.trim() ? excerpt(facts.body, chars) : null;
  return html`<span class="failure-reason">${failureKind(facts)}${body ? html` <q class="handler-answer">${body}</q>` : null}</span>`;
}

// A time ahead, with its weekday: "Tue 3 Dec, 14:02" (the clock alone today).
const ahead = new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
export const aheadTime = (iso: string) => (new Date(iso).toDateString() === new Date().toDateString() ? shortTime(iso) : ahead.format(new Date(iso)));

// "warned 2 of 3 at 15:02 · switches off Tue 3 Dec, 14:02": the parts that apply, none when none does.
export function warningParts(w: WarningFacts): string[] {
  const parts: string[] = [];
  if (w.warnedStage > 0) parts.push(`warned ${w.warnedStage} of ${w.warnStages}${w.warnedAt ? ` at ${shortTime(w.warnedAt)}` : ''}`);
  else if (w.warnStages > 0) parts.push('not warned yet');
  if (w.switchesOffAt) parts.push(`switches off ${aheadTime(w.switchesOffAt)}`);
  return parts;
}

export function WarningLine({ facts }: { facts: WarningFacts }) {
  const parts = warningParts(facts);
  return parts.length ? html`<span class="warning-line">${parts.join(' · ')}</span>` : null;
}
