import { html } from './html.ts';
import { toast } from './toast.ts';

// Small pieces every page shows.

export const fullTime = (iso: string | null | undefined) =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '';

function shortTime(iso: string) {
  const at = new Date(iso);
  return at.toDateString() === new Date().toDateString()
    ? at.toLocaleTimeString(undefined, { timeStyle: 'medium' })
    : at.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
}

export const Time = ({ iso, short }: { iso: string; short?: boolean }) =>
  html`<time datetime=${iso} title=${fullTime(iso)}>${short ? shortTime(iso) : fullTime(iso)}</time>`;

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
