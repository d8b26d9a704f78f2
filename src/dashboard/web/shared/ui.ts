import { html } from './html.ts';
import { toast } from './toast.ts';

// Small pieces every page shows.

export const fullTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '';

// Day and time on one line ("12 Mar, 14:05"): a list's column reads at a glance and never wraps
// into a three-line timestamp; the full time is in the title.
const dayTime = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });

// The clock alone today ("since 01:12"), the day as well otherwise.
export function shortTime(iso: string) {
  const at = new Date(iso);
  return at.toDateString() === new Date().toDateString() ? clock.format(at) : dayTime.format(at);
}

export const Time = ({ iso, short }: { iso: string; short?: boolean }) =>
  html`<time datetime=${iso} title=${fullTime(iso)}>${short ? shortTime(iso) : fullTime(iso)}</time>`;

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
