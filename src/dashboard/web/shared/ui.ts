import { useEffect, useState } from 'preact/hooks';
import { html } from './html.ts';
import { toast } from './toast.ts';

// Small pieces every page shows.

export const fullTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '';

// Day and time on one line ("12 Mar, 14:05"): a list's column reads at a glance and never wraps
// into a three-line timestamp; the full time is in the title.
const dayTime = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const clockSeconds = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
const isToday = (at: Date) => at.toDateString() === new Date().toDateString();

// The clock alone today ("since 01:12"), the day as well otherwise.
export function shortTime(iso: string) {
  const at = new Date(iso);
  return isToday(at) ? clock.format(at) : dayTime.format(at);
}

// To the second, for attempts a few seconds apart; the day as well when it is not today.
const preciseTime = (iso: string) => {
  const at = new Date(iso);
  return isToday(at) ? clockSeconds.format(at) : `${dayTime.format(at)}:${String(at.getSeconds()).padStart(2, '0')}`;
};

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['second', 60],
  ['minute', 60],
  ['hour', 24],
  ['day', 7],
  ['week', 4.35],
  ['month', 12],
  ['year', Infinity],
];

// How long ago (or ahead) in the largest whole unit: "3 min. ago", "yesterday", "in 2 hr.".
export function ago(iso: string, now = Date.now()) {
  let amount = (Date.parse(iso) - now) / 1000;
  for (const [unit, size] of UNITS) {
    if (Math.abs(amount) < size) return relative.format(Math.trunc(amount) || 0, unit);
    amount /= size;
  }
  return '';
}

// Every relative time on the page is redrawn by one timer, so that "3 min. ago" does not go stale.
const TICK_MS = 30_000;
const ticking = new Set<() => void>();
setInterval(() => ticking.forEach((tick) => tick()), TICK_MS);
function useTick() {
  const [, setNow] = useState(0);
  useEffect(() => {
    const tick = () => setNow(Date.now());
    ticking.add(tick);
    return () => void ticking.delete(tick);
  }, []);
}

function RelativeTime({ iso }: { iso: string }) {
  useTick();
  return html`<time datetime=${iso} title=${fullTime(iso)}>${dayTime.format(new Date(iso))}<span class="ago">${ago(iso)}</span></time>`;
}

// A time as lists and cards show it: the day and the clock with how long ago. `short` is for a
// sentence ("since 01:12"), `precise` for a log to the second.
export function Time({ iso, short, precise }: { iso: string; short?: boolean; precise?: boolean }) {
  if (!short && !precise) return html`<${RelativeTime} iso=${iso} />`;
  return html`<time datetime=${iso} title=${fullTime(iso)}>${precise ? preciseTime(iso) : shortTime(iso)}</time>`;
}

const percent = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });
const fine = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
export const formatPercent = (fraction: number | null) => (fraction == null ? '–' : percent.format(fraction));
export const formatMs = (ms: number | null) => (ms == null ? '–' : `${fine.format(ms)} ms`);
export const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

// An attempt's outcome in a word or two ("HTTP 500", "connection failed"), as the server groups them.
export const failureKind = (o: { status: number | null; error: string | null }) =>
  o.status !== null ? `HTTP ${o.status}` : (o.error ?? 'no response').split(':')[0]!.trim();

// What a bulk resend left alone, as a sentence to append ('' when nothing was refused).
export const refusedText = (refused: { reason: string; count: number }[]) =>
  refused.length ? ` Not resent: ${refused.map((r) => `${r.count} because ${r.reason}`).join('; ')}.` : '';

// Headers as a small two-column table (read and copied as `name: value`); `none` says why there are none.
export function HeaderTable({ headers, caption, none }: { headers: Record<string, string> | null; caption: string; none: string }) {
  const entries = Object.entries(headers ?? {});
  if (entries.length === 0) return html`<p class="hint">${none}</p>`;
  return html`<table class="kv">
    <caption class="sr">${caption}</caption>
    <tbody>${entries.map(([k, v]) => html`<tr key=${k}><th scope="row">${k}<span class="sr">: </span></th><td><code>${v}</code></td></tr>`)}</tbody>
  </table>`;
}

// A JSON body indented for reading; anything else as it came.
export function prettyJson(text: string) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// datetime-local inputs speak local time without a zone; the address and the API speak UTC.
export const toLocalInput = (iso: string) => {
  if (!iso) return '';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? '' : new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
export const fromLocalInput = (value: string) => (value ? new Date(value).toISOString() : '');

// A time typed into one plain field, in local time to the minute ("2026-03-12 14:05"): one tab
// stop, where a datetime-local input has seven.
export const toTimeField = (iso: string) => toLocalInput(iso).replace('T', ' ');
const TIME_FIELD = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}))?$/;
// '' for an empty field, null for one that is not a time that exists.
export function fromTimeField(value: string): string | null {
  const text = value.trim();
  if (!text) return '';
  const parts = TIME_FIELD.exec(text);
  if (!parts) return null;
  const [year, month, day, hour, minute] = parts.slice(1).map((p) => Number(p ?? 0)) as [number, number, number, number, number];
  const at = new Date(year, month - 1, day, hour, minute);
  // new Date rolls 2026-02-30 over into March: a day that does not exist is refused, not moved.
  return at.getMonth() === month - 1 && at.getDate() === day && hour < 24 && minute < 60 ? at.toISOString() : null;
}

export const ErrorText = ({ id, error }: { id: string; error: string | null | undefined }) =>
  html`<p id=${id} class="error" role="alert" hidden=${!error}>${error ?? ''}</p>`;

export function CopyButton({ text, label = 'Copy' }: { text: () => string; label?: string }) {
  return html`<button type="button" class="quiet" onClick=${async () => {
    try {
      await navigator.clipboard.writeText(text());
      toast('Copied.');
    } catch {
      toast('Copying is not allowed here; select the text instead.', 'error');
    }
  }}>${label}</button>`;
}
