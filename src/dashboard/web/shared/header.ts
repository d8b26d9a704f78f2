import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, apiError } from './api.ts';
import { useThrottled, useTimeout } from './hooks.ts';
import { $, html } from './html.ts';
import { useLive } from './live.ts';
import { toast } from './toast.ts';
import type { Attention as Counts } from './types.ts';

// What waits for a person, on every page: messages waiting for approval and threads the loop
// breaker paused (shown only then), Failed, Retrying and Stalled deliveries and pending close
// requests, each a link to the list of them. Read again on every change (at most a few times a
// second) and when a Notified delivery is due to turn Stalled.
function Attention() {
  const [counts, setCounts] = useState<Counts | null>(null);
  const load = async () => {
    try {
      setCounts(await api<Counts>('GET', '/attention'));
    } catch {
      // The page's own lists say what went wrong; the counts stay as they were.
    }
  };
  const refresh = useThrottled(load, 400);
  useEffect(() => {
    load();
  }, []);
  useLive((event) => event.type !== 'agent' && refresh());
  useTimeout(counts?.nextStallAt, refresh, counts);
  if (!counts) return null;
  const items = [
    ['waiting', 'Waiting for you', counts.waiting, '/dashboard/overview#waiting', 'bad'],
    ...(counts.paused > 0 ? ([['paused', 'Paused threads', counts.paused, '/dashboard/overview#waiting', 'bad']] as const) : []),
    ['failed', 'Failed', counts.failed, '/dashboard/deliveries?state=failed', 'bad'],
    ['retrying', 'Retrying', counts.retrying, '/dashboard/deliveries?state=retrying', 'warn'],
    ['stalled', 'Stalled', counts.stalled, '/dashboard/deliveries?state=stalled', 'warn'],
    ['close-requests', 'Close requests', counts.closeRequests, '/dashboard/threads?state=close-pending', 'warn'],
  ] as const;
  return html`<nav aria-label="Needs attention">
    <ul class="attention">
      ${items.map(([key, label, n, href, tone]) => html`<li key=${key}>
        <a href=${href} class=${`count ${n > 0 ? tone : 'none'}`} data-count=${key}>${label} <b>${n}</b></a>
      </li>`)}
    </ul>
  </nav>`;
}

// The header of every page but sign-in: the counts, who is signed in, and signing out.
export async function startHeader() {
  $('#live').hidden = false;
  render(html`<${Attention} />`, $('#attention'));
  const signOut = $<HTMLButtonElement>('#sign-out');
  signOut.addEventListener('click', async () => {
    signOut.disabled = true;
    try {
      await api('POST', '/sign-out');
      location.href = '/dashboard/sign-in';
    } catch (error) {
      toast(apiError(error).message, 'error');
      signOut.disabled = false;
    }
  });
  try {
    const me = await api<{ username: string }>('GET', '/me');
    $('#me').textContent = me.username;
    $('.me').hidden = false;
  } catch {
    // Shown by the page: an expired session, or the service out of reach.
  }
}
